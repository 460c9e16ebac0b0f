//! `executor.kind: ray` against a real two-node Ray 2.60 cluster (issue 23):
//! `tests/ray/cluster.sh` starts it in a network namespace (head + "w2",
//! token auth, a `git daemon` relay), the coordinator (`ralph run`) runs in
//! that namespace too, and the fake agent runs on the nodes, reached only
//! through the Jobs API, its work only through the relay.
//!
//! Needs root (network namespaces), iproute2 and Python 3 with venv (Ray,
//! 384 MB, is installed once into target/ray-venv; `.ci/run` does it first,
//! with a word, wherever these tests will run). Without them, or with
//! `RALPH_SKIP_RAY=1`, the tests are skipped and listed as such, except
//! under `CI=true`, where they fail.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::harness::{git, run_records, wait_until, Project, RALPH};

mod validation;

/// Ray takes ~2 GB for two nodes: one cluster at a time in this process.
static ONE_CLUSTER: std::sync::Mutex<()> = std::sync::Mutex::new(());

const CLUSTER_SH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/ray/cluster.sh");

/// An agent key the coordinator has in its environment: it must reach no
/// job spec, log or record.
const AGENT_KEY: &str = "sk-ant-test-4f1b2c9d8e7a";

struct Cluster {
    dir: tempfile::TempDir,
    env: BTreeMap<String, String>,
}

impl Cluster {
    /// Starts the cluster with `bin` first on the nodes' PATH and `scratch`
    /// as the agents' `$SCRATCH`; `None` (with a word) where it cannot run.
    fn start(bin: &Path, scratch: &Path) -> Option<Cluster> {
        Cluster::start_with(bin, scratch, 2)
    }

    /// `start` with `slots` ralph_slot on each node.
    fn start_with(bin: &Path, scratch: &Path, slots: u32) -> Option<Cluster> {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true");
        let why_not = if std::env::var("RALPH_SKIP_RAY").is_ok_and(|v| v == "1") {
            Some("RALPH_SKIP_RAY=1")
        } else if unsafe { libc_geteuid() } != 0 {
            Some("needs root for network namespaces")
        } else if Command::new("ip").arg("-V").output().is_err() {
            Some("needs iproute2 (`ip netns`)")
        } else if Command::new("python3").arg("--version").output().is_err() {
            Some("needs python3 to install Ray")
        } else if Command::new("python3")
            .args(["-c", "import ensurepip, venv"])
            .output()
            .map_or(true, |o| !o.status.success())
        {
            Some("needs python3's venv and ensurepip (apt-get install python3-venv) to install Ray")
        } else {
            None
        };
        if let Some(why) = why_not {
            assert!(!ci, "the Ray tests must run under CI=true: {why}");
            crate::testenv::skip(&format!("Ray cluster tests: {why}"));
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new("bash")
            .arg(CLUSTER_SH)
            .arg("start")
            .arg(dir.path())
            .arg(bin)
            .env("SCRATCH", scratch)
            .env("RALPH_RAY_SLOTS", slots.to_string())
            .env("GIT_AUTHOR_NAME", "Node")
            .env("GIT_AUTHOR_EMAIL", "node@example.com")
            .env("GIT_COMMITTER_NAME", "Node")
            .env("GIT_COMMITTER_EMAIL", "node@example.com")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .stdin(Stdio::null())
            .output()
            .expect("cluster.sh runs");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let env: BTreeMap<String, String> = text
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let c = Cluster { dir, env };
        if !out.status.success() {
            let why = String::from_utf8_lossy(&out.stderr).into_owned();
            let ray_missing = why.contains("pip") || why.contains("venv");
            assert!(!ci || !ray_missing, "Ray could not be installed: {why}");
            if ray_missing {
                crate::testenv::skip(&format!("Ray could not be installed: {why}"));
                return None;
            }
            panic!("the cluster did not start: {why}\n{text}");
        }
        Some(c)
    }

    fn ns(&self) -> &str {
        &self.env["RAY_NS"]
    }

    fn token(&self) -> &str {
        &self.env["RAY_TOKEN"]
    }

    /// A bare repository served by the relay's `git daemon`; its URL.
    fn relay(&self, name: &str) -> (PathBuf, String) {
        let path = PathBuf::from(&self.env["RELAY_DIR"]).join(name);
        std::fs::create_dir_all(&path).unwrap();
        git(&path, &["init", "-q", "--bare"]);
        let url = format!("{}/{name}", self.env["RELAY_URL_BASE"]);
        (path, url)
    }

    /// `ralph ARGS` for `p`, run inside the namespace.
    fn ralph(&self, p: &Project, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", self.ns(), RALPH])
            .args(args)
            .current_dir(&p.root)
            .env("HOME", &p.home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("CI", "1")
            .env("RAY_AUTH_TOKEN", self.token())
            .env("ANTHROPIC_API_KEY", AGENT_KEY)
            .env_remove("RALPH_ATTEMPT_TOKEN")
            .stdin(Stdio::null());
        c
    }

    /// `GET path` on the Jobs API, with the token.
    fn api(&self, path: &str) -> String {
        let out = Command::new("ip")
            .args(["netns", "exec", self.ns(), "curl", "-sf", "-H"])
            .arg(format!("Authorization: Bearer {}", self.token()))
            .arg(format!("{}{path}", self.env["RAY_ADDRESS"]))
            .output()
            .expect("curl runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn jobs(&self) -> Vec<serde_json::Value> {
        serde_json::from_str(&self.api("/api/jobs/")).unwrap_or_default()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(CLUSTER_SH)
            .arg("stop")
            .arg(self.dir.path())
            .stdin(Stdio::null())
            .output();
    }
}

unsafe extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
}

/// The cluster, the agents' scratch directory and the nodes' PATH
/// directory, this process's one cluster held: bound in this order, the
/// cluster stops first and the hold goes last. `None` where it cannot run.
fn cluster() -> Option<(
    std::sync::MutexGuard<'static, ()>,
    tempfile::TempDir,
    tempfile::TempDir,
    Cluster,
)> {
    let one = ONE_CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let scratch = tempfile::tempdir().unwrap();
    let bin = tempfile::tempdir().unwrap();
    let c = Cluster::start(bin.path(), scratch.path())?;
    Some((one, scratch, bin, c))
}

/// A project whose `origin` is the relay and whose executor is the cluster,
/// with ralph installed on the nodes (the one this test runs).
fn project(c: &Cluster, queue: &str, agent: &str) -> Project {
    project_with(c, queue, agent, RALPH, r#"{ "ralph_slot": 1 }"#)
}

/// `project`, ralph's path on the nodes `ralph_path` ("": uploaded with
/// each job, Ray's `working_dir`), each job asking for `resources`.
fn project_with(
    c: &Cluster,
    queue: &str,
    agent: &str,
    ralph_path: &str,
    resources: &str,
) -> Project {
    let extra = r#"{ "loop": { "max_retries": 2, "grace_seconds": 1 },
      "executor": { "kind": "ray",
        "ray": { "ralph_path": "RALPH", "resources": RESOURCES } } }"#
        .replace("RALPH", ralph_path)
        .replace("RESOURCES", resources);
    let p = Project::with_backlog(queue, &extra);
    p.agent(agent);
    p.commit_all("backlog");
    let (_, url) = c.relay("relay.git");
    git(&p.root, &["remote", "add", "origin", &url]);
    p
}

/// What a spawned `ralph` (output piped) ended with.
fn ended(child: std::process::Child) -> crate::harness::RunResult {
    let out = child.wait_with_output().unwrap();
    crate::harness::RunResult {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn run_to_end(p: &Project, cmd: Command) -> crate::harness::RunResult {
    p.run_to_end(cmd, &["run"])
}

/// Each agent notes its node and its run, waits until `$SCRATCH/want`
/// agents have started (so attempts overlap and both nodes get some), then
/// commits a file naming its node.
const NODE_AGENT: &str = r#"
echo "$RALPH_TEST_NODE" >> "$SCRATCH/runs-$ID"
touch "$SCRATCH/started-$ID"
want=$(cat "$SCRATCH/want" 2>/dev/null || echo 1)
for _ in $(seq 600); do
  [ "$(ls "$SCRATCH" | grep -c '^started-')" -ge "$want" ] && break
  [ -e "$SCRATCH/go-$ID" ] && break
  sleep 0.1
done
while [ -e "$SCRATCH/hold-$ID" ] && [ ! -e "$SCRATCH/go-$ID" ]; do sleep 0.1; done
commit_file "src/$ID.txt" "$ID on $RALPH_TEST_NODE"
done_
"#;

#[test]
fn stories_land_through_ray_jobs_on_both_nodes() {
    let _one = ONE_CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let scratch = tempfile::tempdir().unwrap();
    let bin = tempfile::tempdir().unwrap();
    // The agent goes on the nodes' PATH (the cluster's), not the coordinator's.
    let Some(c) = Cluster::start(bin.path(), scratch.path()) else {
        return;
    };
    // ralph is not on the nodes: each job carries it (working_dir upload).
    let p = project_with(
        &c,
        "# [batch:1]\n1.1 | a\n1.2 | b\n1.3 | c\n1.4 | d\n",
        NODE_AGENT,
        "",
        r#"{ "ralph_slot": 1 }"#,
    );
    std::fs::copy(p.bin.join("claude"), bin.path().join("claude")).unwrap();
    std::fs::write(scratch.path().join("want"), "4").unwrap();
    // `ralph validate` checks the cluster: it answers, and takes the token.
    let v = run_to_end(&p, c.ralph(&p, &["validate"]));
    assert_eq!(v.code, 0, "{v:?}");
    assert!(
        v.stdout.contains(
            "ok: Ray 2.60.0 at http://127.0.0.1:8265 answers with the token in $RAY_AUTH_TOKEN"
        ),
        "{v:?}"
    );
    let mut wrong = c.ralph(&p, &["validate"]);
    wrong.env("RAY_AUTH_TOKEN", "not-the-token");
    let v = run_to_end(&p, wrong);
    assert_eq!(v.code, 2, "{v:?}");
    assert!(v.stderr.contains("refused ralph's token (HTTP 40"), "{v:?}");
    // What would fail the night at its first minute (issue 35): a resource
    // no node offers (every job would wait for ever), more of one than any
    // node has, and a relay nothing answers on (every base push fails).
    let cfg = p.read(".ralph/config.json");
    let mut broken: serde_json::Value = serde_json::from_str(&cfg).unwrap();
    broken["executor"]["ray"]["resources"] = serde_json::json!({ "ralph_slot": 3, "gpu_a100": 1 });
    broken["executor"]["relay"] = serde_json::json!("git://127.0.0.1:9/nothing.git");
    p.write(".ralph/config.json", &broken.to_string());
    let v = run_to_end(&p, c.ralph(&p, &["validate"]));
    p.write(".ralph/config.json", &cfg);
    assert_eq!(v.code, 2, "{v:?}");
    for said in [
        "executor.ray.resources: no live node of the cluster offers 3 of \"ralph_slot\"",
        "executor.ray.resources: no live node of the cluster offers 1 of \"gpu_a100\"",
        "executor.relay \"git://127.0.0.1:9/nothing.git\"",
    ] {
        assert!(v.stderr.contains(said), "{said}: {v:?}");
    }
    // The agents hold until the test has seen the four jobs' specs (a
    // collected job is deleted from the cluster).
    let ids = ["1.1", "1.2", "1.3", "1.4"];
    for id in ids {
        std::fs::write(scratch.path().join(format!("hold-{id}")), "").unwrap();
    }
    let run = c
        .ralph(&p, &["run", "-j", "4"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("four agents to run", Duration::from_secs(180), || {
        ids.iter()
            .all(|id| scratch.path().join(format!("started-{id}")).exists())
    });
    let specs = c.api("/api/jobs/");
    let jobs: Vec<serde_json::Value> = serde_json::from_str(&specs).unwrap();
    for id in ids {
        std::fs::write(scratch.path().join(format!("go-{id}")), "").unwrap();
    }
    let r = ended(run);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.completed(), ["1.1", "1.2", "1.3", "1.4"], "{r:?}");
    let mut nodes = BTreeSet::new();
    for id in ["1.1", "1.2", "1.3", "1.4"] {
        let landed = p.file_on_main(&format!("src/{id}.txt")).unwrap_or_default();
        let node = landed.trim().rsplit(' ').next().unwrap_or("").to_string();
        assert!(landed.starts_with(&format!("{id} on ")), "{id}: {landed:?}");
        nodes.insert(node);
        // What the user sees, however many job supervisors Ray lost under
        // load (ralph submits such an attempt again, a fault outside the
        // story): each story landed once and was charged no failure.
        assert_eq!(p.merges_of(id), 1, "{id}: {:?}", p.main_subjects());
        let story = p.story(id);
        assert_eq!(story["status"], "done", "{id}: {story:#}");
        assert_eq!(
            story["attempts"], 0,
            "{id}: a failure was charged: {story:#}"
        );
        let runs = std::fs::read_to_string(scratch.path().join(format!("runs-{id}"))).unwrap();
        assert!(runs.lines().count() >= 1, "{id}: {runs}");
    }
    assert_eq!(
        nodes,
        BTreeSet::from(["head".to_string(), "w2".to_string()]),
        "four overlapping attempts of one slot each on nodes of two slots use both"
    );
    // The relay keeps nothing of collected attempts; the coordinator's
    // repository has no relay refs under its kept-work namespace.
    let (relay, _) = (PathBuf::from(&c.env["RELAY_DIR"]).join("relay.git"), ());
    let left = git(
        &relay,
        &["for-each-ref", "--format=%(refname)", "refs/ralph/"],
    );
    assert_eq!(left.trim(), "", "relay refs left: {left}");
    assert_eq!(p.refs("refs/ralph-relay/"), Vec::<String>::new());
    // Every job ran the uploaded binary, not a path on this machine. A job
    // whose supervisor Ray lost (two of four were, once, on two loaded
    // CPUs: no entrypoint, no metadata) is not counted: what it cost the
    // user is checked above.
    let ran: Vec<&serde_json::Value> = jobs
        .iter()
        .filter(|j| j["error_type"] != "JOB_SUPERVISOR_ACTOR_DIED")
        .collect();
    assert!(!ran.is_empty(), "{specs}");
    for j in &ran {
        assert!(
            j["entrypoint"]
                .as_str()
                .unwrap()
                .starts_with("./ralph worker attempt "),
            "{j}"
        );
        assert!(
            j["runtime_env"]["working_dir"]
                .as_str()
                .unwrap()
                .starts_with("gcs://_ray_pkg_"),
            "{j}"
        );
    }
    // Secrets: the token and the agent key are in no job spec, log or record.
    for secret in [c.token(), AGENT_KEY] {
        assert!(!specs.contains(secret), "a job spec holds a secret");
        for f in walk(&p.root.join(".ralph"))
            .into_iter()
            .chain([p.root.join("ralph.log")])
        {
            let text = std::fs::read(&f).unwrap_or_default();
            assert!(
                !String::from_utf8_lossy(&text).contains(secret),
                "{} holds a secret",
                f.display()
            );
        }
    }
}

#[test]
fn a_coordinator_killed_mid_run_reattaches_and_collects() {
    let _one = ONE_CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let scratch = tempfile::tempdir().unwrap();
    let bin = tempfile::tempdir().unwrap();
    let Some(c) = Cluster::start(bin.path(), scratch.path()) else {
        return;
    };
    let p = project(&c, "# [batch:1]\n1.1 | a\n1.2 | b\n1.3 | c\n", NODE_AGENT);
    std::fs::copy(p.bin.join("claude"), bin.path().join("claude")).unwrap();
    let ids = ["1.1", "1.2", "1.3"];
    for id in ids {
        std::fs::write(scratch.path().join(format!("hold-{id}")), "").unwrap();
    }
    std::fs::write(scratch.path().join("want"), "3").unwrap();
    let mut first = c
        .ralph(&p, &["run", "-j", "3"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = |id: &str| scratch.path().join(format!("started-{id}")).exists();
    wait_until(
        "three agents run on the cluster",
        Duration::from_secs(120),
        || ids.iter().all(|id| started(id)),
    );
    // 1.1 lands while the first coordinator lives: the target moves on
    // under the other two jobs' bases.
    std::fs::write(scratch.path().join("go-1.1"), "").unwrap();
    wait_until("story 1.1 to land", Duration::from_secs(120), || {
        p.merges_of("1.1") == 1
    });
    // SIGKILL: the coordinator leaves no word; its jobs run on.
    first.kill().unwrap();
    first.wait().unwrap();
    // 1.2 finishes while no coordinator is there; 1.3 is still running
    // when the next one starts.
    std::fs::write(scratch.path().join("go-1.2"), "").unwrap();
    wait_until(
        "story 1.2's job to succeed",
        Duration::from_secs(120),
        || {
            c.jobs()
                .iter()
                .any(|j| j["metadata"]["ralph_story"] == "1.2" && j["status"] == "SUCCEEDED")
        },
    );
    let second = c
        .ralph(&p, &["run", "-j", "3"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("the new run to re-attach", Duration::from_secs(120), || {
        p.read("ralph.log").contains("re-attaching to job ralph-")
            && p.read("ralph.log").contains("-1.3-1 of an earlier run")
    });
    std::fs::write(scratch.path().join("go-1.3"), "").unwrap();
    let out = second.wait_with_output().unwrap();
    let shown = format!(
        "{}\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        p.read("ralph.log")
    );
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert_eq!(p.completed(), ids, "{shown}");
    for id in ids {
        let runs = std::fs::read_to_string(scratch.path().join(format!("runs-{id}"))).unwrap();
        assert_eq!(
            runs.lines().count(),
            1,
            "story {id} ran more than once: {runs}\n{shown}"
        );
        assert_eq!(p.merges_of(id), 1);
    }
}

/// Starts a grandchild in a session of its own (out of the agent's group),
/// notes both PIDs, then waits for ever.
const STUBBORN_AGENT: &str = r#"
echo "$RALPH_TEST_NODE" >> "$SCRATCH/runs-$ID"
echo "half done" > wip.txt
tool "echo remote-activity-$RALPH_TEST_NODE"
setsid sleep 1000 &
echo $! > "$SCRATCH/grandchild-$ID"
echo $$ > "$SCRATCH/agent-$ID"
while :; do sleep 0.1; done
"#;

#[test]
fn ctrl_c_stops_the_job_and_its_whole_tree() {
    let _one = ONE_CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let scratch = tempfile::tempdir().unwrap();
    let bin = tempfile::tempdir().unwrap();
    let Some(c) = Cluster::start(bin.path(), scratch.path()) else {
        return;
    };
    let p = project(&c, "1.1 | a\n", STUBBORN_AGENT);
    std::fs::copy(p.bin.join("claude"), bin.path().join("claude")).unwrap();
    let out = std::fs::File::create(p.scratch.join("out")).unwrap();
    let mut run = c
        .ralph(&p, &["run", "-v"])
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .unwrap();
    // What the agent does on the node reaches the coordinator's display.
    wait_until(
        "the remote agent's activity shown",
        Duration::from_secs(120),
        || {
            p.scratch_text("out").contains("[1.1] ")
                && p.scratch_text("out").contains("remote-activity-")
        },
    );
    let pid_in = |name: &str| -> Option<i32> {
        std::fs::read_to_string(scratch.path().join(name))
            .ok()
            .and_then(|s| s.trim().parse().ok())
    };
    wait_until(
        "the agent and its grandchild run",
        Duration::from_secs(120),
        || pid_in("agent-1.1").is_some() && pid_in("grandchild-1.1").is_some(),
    );
    let (agent, grandchild) = (
        pid_in("agent-1.1").unwrap(),
        pid_in("grandchild-1.1").unwrap(),
    );
    assert!(crate::harness::alive(agent) && crate::harness::alive(grandchild));
    Command::new("kill")
        .args(["-INT", &run.id().to_string()])
        .status()
        .unwrap();
    let limit = std::time::Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(s) = run.try_wait().unwrap() {
            break s;
        }
        assert!(std::time::Instant::now() < limit, "ralph did not stop");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(130), "{}", p.read("ralph.log"));
    wait_until(
        "the remote tree to be gone",
        Duration::from_secs(60),
        || !crate::harness::alive(agent) && !crate::harness::alive(grandchild),
    );
    // The job was stopped, not left running; the story is not charged.
    assert!(
        c.jobs()
            .iter()
            .filter(|j| j["metadata"]["ralph_story"] == "1.1")
            .all(|j| j["status"] == "STOPPED"),
        "{:?}",
        c.jobs()
    );
    assert_eq!(p.story("1.1")["attempts"], 0, "{}", p.read("ralph.log"));
    // What the agent left uncommitted came back from the node and is kept.
    let kept = "refs/ralph/attempts/1.1/1-uncommitted";
    assert_eq!(
        p.refs("refs/ralph/attempts/"),
        [kept],
        "{}",
        p.read("ralph.log")
    );
    assert_eq!(
        git(&p.root, &["show", &format!("{kept}:wip.txt")]),
        "half done\n"
    );
}

/// On "w2" the agent commits some early work, then waits until its node
/// is gone; elsewhere it finishes.
const W2_HOLDS_AGENT: &str = r#"
echo "$RALPH_TEST_NODE" >> "$SCRATCH/runs-$ID"
grep -o 'refs/ralph/attempts/[^ ,;]*' "$PROMPT_FILE" >> "$SCRATCH/told-$ID" || true
if [ "$RALPH_TEST_NODE" = w2 ]; then
  commit_file "src/early-$ID.txt" "early work of $ID"
  touch "$SCRATCH/on-w2"
  while :; do sleep 0.1; done
fi
commit_file "src/$ID.txt" "$ID on $RALPH_TEST_NODE"
done_
"#;

#[test]
fn a_node_lost_mid_attempt_costs_no_retry() {
    let _one = ONE_CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let scratch = tempfile::tempdir().unwrap();
    let bin = tempfile::tempdir().unwrap();
    // One slot per node: two overlapping attempts take one each.
    let Some(c) = Cluster::start_with(bin.path(), scratch.path(), 1) else {
        return;
    };
    let p = project(&c, "# [batch:1]\n1.1 | a\n1.2 | b\n", W2_HOLDS_AGENT);
    std::fs::copy(p.bin.join("claude"), bin.path().join("claude")).unwrap();
    let run = c
        .ralph(&p, &["run", "-j", "2"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("an attempt to run on w2", Duration::from_secs(120), || {
        scratch.path().join("on-w2").exists()
    });
    // The worker pushes the agent's commits as it makes them.
    wait_until(
        "w2's early commit on the relay",
        Duration::from_secs(60),
        || relay_refs(&c).iter().any(|r| r.contains("/progress/")),
    );
    // The second node dies (its whole process group, as a machine would).
    Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", c.env["W2_PGID"])])
        .status()
        .unwrap();
    let out = run.wait_with_output().unwrap();
    let shown = format!(
        "{}\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        p.read("ralph.log")
    );
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert_eq!(p.completed(), ["1.1", "1.2"], "{shown}");
    let lost: Vec<&str> = ["1.1", "1.2"]
        .into_iter()
        .filter(|id| {
            std::fs::read_to_string(scratch.path().join(format!("runs-{id}")))
                .unwrap_or_default()
                .starts_with("w2")
        })
        .collect();
    assert_eq!(lost.len(), 1, "{shown}");
    let id = lost[0];
    let runs = std::fs::read_to_string(scratch.path().join(format!("runs-{id}"))).unwrap();
    assert_eq!(runs.lines().collect::<Vec<_>>(), ["w2", "head"], "{shown}");
    // The lost attempt is not charged to the story (a charged one would count).
    assert_eq!(p.story(id)["attempts"], 0, "{shown}");
    // What the agent had committed on w2 before the node died is kept.
    let kept = format!("refs/ralph/attempts/{id}/1-interrupted");
    assert_eq!(
        p.refs(&format!("refs/ralph/attempts/{id}/")),
        std::slice::from_ref(&kept),
        "{shown}"
    );
    assert_eq!(
        git(&p.root, &["show", &format!("{kept}:src/early-{id}.txt")]),
        format!("early work of {id}\n")
    );
    // Its job never reported, so nothing collected its relay refs: the
    // run's end sweeps them (its base would stay for ever otherwise).
    assert_eq!(relay_refs(&c), Vec::<String>::new(), "{shown}");
    assert_eq!(p.refs("refs/ralph-relay/"), Vec::<String>::new());
    // That ref is named as other kept work is: in the retry's prompt (the
    // story's note), in the lost attempt's history and record, and in the
    // line the run printed about the fault.
    let told =
        std::fs::read_to_string(scratch.path().join(format!("told-{id}"))).unwrap_or_default();
    assert_eq!(told.lines().collect::<Vec<_>>(), [kept.as_str()], "{shown}");
    let hist = p.story(id)["history"].clone();
    assert_eq!(hist[0]["saved_ref"], kept.as_str(), "{hist}");
    let ended: Vec<serde_json::Value> = run_records(&p)
        .into_iter()
        .filter(|r| r["ev"] == "attempt_end" && r["story"] == id && r["attempt"] == 1)
        .collect();
    assert_eq!(ended.len(), 1, "{ended:?}");
    assert_eq!(ended[0]["saved_ref"], kept.as_str(), "{ended:?}");
    assert!(
        shown.contains(&format!("its commits are kept at {kept}")),
        "{shown}"
    );
}

/// The agent notes its node, then holds until the test lets it go.
const HELD_AGENT: &str = r#"
echo "$RALPH_TEST_NODE" > "$SCRATCH/node-$ID"
while [ ! -e "$SCRATCH/go-$ID" ]; do sleep 0.1; done
commit_file "src/$ID.txt" "$ID on $RALPH_TEST_NODE"
done_
"#;

#[test]
fn the_node_of_a_running_attempt_shows_while_it_runs() {
    let _one = ONE_CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let scratch = tempfile::tempdir().unwrap();
    let bin = tempfile::tempdir().unwrap();
    let Some(c) = Cluster::start(bin.path(), scratch.path()) else {
        return;
    };
    let p = project(&c, "1.1 | a\n", HELD_AGENT);
    std::fs::copy(p.bin.join("claude"), bin.path().join("claude")).unwrap();
    let out = std::fs::File::create(p.scratch.join("out")).unwrap();
    let run = c
        .ralph(&p, &["run", "-v"])
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .unwrap();
    let status_json = || -> serde_json::Value {
        let o = c.ralph(&p, &["status", "--json"]).output().unwrap();
        serde_json::from_slice(&o.stdout).unwrap_or_default()
    };
    wait_until("the agent to run", Duration::from_secs(120), || {
        scratch.path().join("node-1.1").exists()
    });
    // While it runs: `status --json` says where, as does the story's row.
    // Read together with the node the agent says it runs on, each time: the
    // agent's `echo … > node-1.1` makes the file before it writes the name,
    // and a read in between (seen in CI under load) found it empty.
    let mut st = serde_json::Value::Null;
    let mut ran_on = String::new();
    wait_until(
        "status --json to name the node the attempt runs on",
        Duration::from_secs(60),
        || {
            st = status_json();
            ran_on = std::fs::read_to_string(scratch.path().join("node-1.1")).unwrap_or_default();
            st["running_on"]["1.1"]
                .as_str()
                .is_some_and(|n| n.starts_with(&format!("{}/", ran_on.trim())))
        },
    );
    let node = st["running_on"]["1.1"].as_str().unwrap().to_string();
    assert!(node.starts_with(&format!("{}/", ran_on.trim())), "{st}");
    assert_eq!(st["running"], serde_json::json!(["1.1"]), "{st}");
    assert_eq!(st["stories"][0]["node"], node.as_str(), "{st}");
    // ... plain `status` ...
    let text = c.ralph(&p, &["status"]).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    assert!(
        text.contains(&format!("Running: 1.1 (on {node})")),
        "{text}"
    );
    // ... the run's records, which the web view's running table folds ...
    let placed: Vec<serde_json::Value> = run_records(&p)
        .into_iter()
        .filter(|r| r["ev"] == "attempt_placed" || r["ev"] == "attempt_end")
        .collect();
    assert_eq!(placed.len(), 1, "{placed:?}");
    assert_eq!(
        (
            &placed[0]["ev"],
            &placed[0]["story"],
            &placed[0]["attempt"],
            &placed[0]["node"]
        ),
        (
            &serde_json::json!("attempt_placed"),
            &serde_json::json!("1.1"),
            &serde_json::json!(1),
            &serde_json::json!(node)
        )
    );
    // ... and the run's display.
    wait_until("the run to show the node", Duration::from_secs(30), || {
        p.scratch_text("out")
            .contains(&format!("[1.1] on node {node}"))
    });
    std::fs::write(scratch.path().join("go-1.1"), "").unwrap();
    let out = run.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", p.scratch_text("out"));
    assert_eq!(p.completed(), ["1.1"]);
    // Once it ended the node is the attempt's on record, and nothing runs.
    assert_eq!(p.story("1.1")["history"][0]["node"], node.as_str());
    assert!(
        p.story("1.1").get("running_on").is_none(),
        "{}",
        p.story("1.1")
    );
    let st = status_json();
    assert_eq!(st["running_on"], serde_json::json!({}), "{st}");
}

/// The refs the test relay holds under `refs/ralph/`.
fn relay_refs(c: &Cluster) -> Vec<String> {
    let relay = PathBuf::from(&c.env["RELAY_DIR"]).join("relay.git");
    git(
        &relay,
        &["for-each-ref", "--format=%(refname)", "refs/ralph/"],
    )
    .lines()
    .map(str::to_string)
    .collect()
}

/// Leaves work uncommitted, notes its PID, and holds until told to go.
const WIP_AGENT: &str = r#"
echo "$RALPH_TEST_NODE" >> "$SCRATCH/runs-$ID"
echo "wip of $ID" > wip.txt
echo $$ > "$SCRATCH/agent-$ID"
touch "$SCRATCH/started-$ID"
while [ ! -e "$SCRATCH/go-$ID" ]; do sleep 0.1; done
rm wip.txt
commit_file "src/$ID.txt" "$ID"
done_
"#;

#[test]
fn a_crashed_runs_job_no_attempt_claims_is_stopped_at_the_next_runs_start() {
    let _one = ONE_CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let scratch = tempfile::tempdir().unwrap();
    let bin = tempfile::tempdir().unwrap();
    let Some(c) = Cluster::start(bin.path(), scratch.path()) else {
        return;
    };
    let p = project(&c, "# [batch:1]\n1.1 | a\n1.2 | b\n", WIP_AGENT);
    std::fs::copy(p.bin.join("claude"), bin.path().join("claude")).unwrap();
    let mut first = c
        .ralph(&p, &["run", "-j", "2"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = |id: &str| scratch.path().join(format!("started-{id}")).exists();
    wait_until("both agents run", Duration::from_secs(120), || {
        started("1.1") && started("1.2")
    });
    // SIGKILL: both jobs run on with no coordinator.
    first.kill().unwrap();
    first.wait().unwrap();
    let agent_12: i32 = std::fs::read_to_string(scratch.path().join("agent-1.2"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // The next run is asked for 1.1 only: 1.2's job is claimed by no
    // attempt, and is stopped while the run goes on (issue 35; it was
    // stopped only at the run's end, which 1.1's held agent keeps away).
    let second = c
        .ralph(&p, &["run", "-s", "1.1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until(
        "1.2's agent to be gone while 1.1's still runs",
        Duration::from_secs(120),
        || !crate::harness::alive(agent_12),
    );
    std::fs::write(scratch.path().join("go-1.1"), "").unwrap();
    let r = ended(second);
    let shown = format!("{r:?}\n{}", p.read("ralph.log"));
    assert_eq!(r.code, 0, "{shown}");
    assert_eq!(p.completed(), ["1.1"], "{shown}");
    // 1.2's job was deleted from the cluster.
    assert!(
        !c.jobs()
            .iter()
            .any(|j| j["metadata"]["ralph_story"] == "1.2"),
        "{:?}\n{shown}",
        c.jobs()
    );
    // What its agent left uncommitted came home before the relay was
    // cleared; the relay keeps nothing.
    let kept = "refs/ralph/attempts/1.2/1-uncommitted";
    assert_eq!(p.refs("refs/ralph/attempts/1.2/"), [kept], "{shown}");
    assert_eq!(
        git(&p.root, &["show", &format!("{kept}:wip.txt")]),
        "wip of 1.2\n"
    );
    assert_eq!(relay_refs(&c), Vec::<String>::new(), "{shown}");
    assert_eq!(p.refs("refs/ralph-relay/"), Vec::<String>::new());
    // 1.2 ran once, and runs again (from its kept work) when asked.
    let runs = std::fs::read_to_string(scratch.path().join("runs-1.2")).unwrap();
    assert_eq!(runs.lines().count(), 1, "{runs}");
}

/// Slots are the local executor's (issue 33): a Ray run with a slot free
/// while a story waits for its dependency makes no slot worktree on the
/// coordinator. Before, the dispatcher warmed one whatever executor ran.
#[test]
fn a_ray_run_makes_no_slot_worktree_here() {
    let _one = ONE_CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let scratch = tempfile::tempdir().unwrap();
    let bin = tempfile::tempdir().unwrap();
    let Some(c) = Cluster::start(bin.path(), scratch.path()) else {
        return;
    };
    let agent = "commit_file \"src/$ID.txt\"\ndone_\n";
    let p = project(&c, "# [batch:1]\n1.1 | a\n1.2 | b\n", agent);
    crate::harness::depends(&p, "1.2", "[1.1]");
    p.commit_all("1.2 waits for 1.1");
    std::fs::copy(p.bin.join("claude"), bin.path().join("claude")).unwrap();
    let r = run_to_end(&p, c.ralph(&p, &["run", "-j", "2"]));
    let log = p.read("ralph.log");
    assert_eq!(r.code, 0, "{r:?}\n{log}");
    assert_eq!(p.completed(), ["1.1", "1.2"], "{r:?}\n{log}");
    assert!(!log.contains(" ready at "), "a slot was warmed:\n{log}");
}

/// A required validation that fails until the story's tree has `ok.txt`.
const GATED_RESOURCES: &str = r#"{ "ralph_slot": 1 }"#;

#[test]
fn a_fixup_runs_remotely_from_its_kept_work() {
    let _one = ONE_CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let scratch = tempfile::tempdir().unwrap();
    let bin = tempfile::tempdir().unwrap();
    let Some(c) = Cluster::start(bin.path(), scratch.path()) else {
        return;
    };
    let agent = r#"
git log -1 --format=%s > "$SCRATCH/head-$N"
if [ "$N" = 1 ]; then
  commit_file "src/a.txt"
else
  echo ok > ok.txt; git add ok.txt; git commit -qm "fix(story-1.1): ok.txt"
fi
done_
"#;
    let p = project_with(&c, "1.1 | Gate\n", agent, RALPH, GATED_RESOURCES);
    let cfg = p.read(".ralph/config.json");
    let mut v: serde_json::Value = serde_json::from_str(&cfg).unwrap();
    v["validation"] = serde_json::json!({ "commands": [
        { "name": "has-ok", "cmd": "test -f ok.txt", "required": true } ] });
    p.write(".ralph/config.json", &v.to_string());
    p.commit_all("gate");
    std::fs::copy(p.bin.join("claude"), bin.path().join("claude")).unwrap();
    let r = run_to_end(&p, c.ralph(&p, &["run"]));
    assert_eq!(r.code, 0, "{r:?}\n{}", p.read("ralph.log"));
    assert_eq!(p.kinds("1.1"), vec!["first", "fixup"]);
    // On the node, the fix-up began from ralph's merge of main and the
    // story's kept work (fetched from the relay), as it does locally.
    assert_eq!(
        std::fs::read_to_string(scratch.path().join("head-2"))
            .unwrap()
            .trim(),
        "fix-up(story-1.1): merge main into the story's work"
    );
    assert_eq!(p.file_on_main("ok.txt").as_deref(), Some("ok\n"));
    assert_eq!(p.file_on_main("src/a.txt").as_deref(), Some("1.1\n"));
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = e.path();
        if path.is_dir() {
            if path.ends_with("worktrees") {
                continue;
            }
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// A 4-second agent (`sleep`, then one commit).
const SLEEPY_AGENT: &str = r#"
sleep 4
commit_file "src/$ID.txt" "$ID on ${RALPH_TEST_NODE:-local}"
done_
"#;

/// BENCHMARKS.md's figure (issue 23): 16 stories of a 4-second agent at
/// `-j 4`, as jobs on one node of two slots, on two nodes of two slots,
/// and with the local executor; prints the makespans. Not a test of
/// speed (nothing is asserted on time): run it by hand with
/// `cargo test --test it ray::makespan -- --ignored --nocapture`.
#[test]
#[ignore]
fn makespan_figures() {
    let _one = ONE_CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let scratch = tempfile::tempdir().unwrap();
    let bin = tempfile::tempdir().unwrap();
    let Some(c) = Cluster::start(bin.path(), scratch.path()) else {
        return;
    };
    let mut queue = String::from("# [batch:1]\n");
    for i in 1..=16 {
        queue.push_str(&format!("1.{i} | s{i}\n"));
    }
    let time = |p: &Project, cmd: Command| {
        let t = std::time::Instant::now();
        let r = run_to_end(p, cmd);
        let secs = t.elapsed().as_secs_f64();
        assert_eq!(r.code, 0, "{r:?}");
        assert_eq!(p.completed().len(), 16);
        secs
    };
    // Local: the same agent, the same -j.
    let local = Project::with_backlog(&queue, r#"{ "loop": { "grace_seconds": 1 } }"#);
    local.agent(SLEEPY_AGENT);
    local.commit_all("backlog");
    let local_4 = time(&local, local.command(&["run", "-j", "4"]));
    let local2 = Project::with_backlog(&queue, r#"{ "loop": { "grace_seconds": 1 } }"#);
    local2.agent(SLEEPY_AGENT);
    local2.commit_all("backlog");
    let local_2 = time(&local2, local2.command(&["run", "-j", "2"]));
    // `RALPH_BENCH_LOGS=DIR` keeps each Ray run's ralph.log there: its
    // `timing:` lines break each job's time down by phase.
    let keep = std::env::var_os("RALPH_BENCH_LOGS").map(PathBuf::from);
    let ray_run = |resources: &str, name: &str| {
        let p = project_with(&c, &queue, SLEEPY_AGENT, RALPH, resources);
        std::fs::copy(p.bin.join("claude"), bin.path().join("claude")).unwrap();
        let secs = time(&p, c.ralph(&p, &["run", "-j", "4"]));
        if let Some(dir) = &keep {
            std::fs::create_dir_all(dir).unwrap();
            std::fs::copy(p.root.join("ralph.log"), dir.join(format!("{name}.log"))).unwrap();
        }
        secs
    };
    let one_node = ray_run(r#"{ "ralph_slot": 1, "node_head": 0.01 }"#, "one-node");
    let two_nodes = ray_run(r#"{ "ralph_slot": 1 }"#, "two-nodes");
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "figures: 16 stories x 4 s agent, -j 4\n\
         local -j 4: {local_4:.1} s\n\
         local -j 2: {local_2:.1} s\n\
         ray, 1 node x 2 slots: {one_node:.1} s\n\
         ray, 2 nodes x 2 slots: {two_nodes:.1} s\n\
         two nodes / one node: {:.2}\n\
         job overhead per attempt vs local (1 node x 2 slots vs local -j 2, 8 rounds): {:.2} s\n\
         load average: {load}",
        two_nodes / one_node,
        (one_node - local_2) / 8.0
    );
}

/// A Claude-format agent naming a session, noting where it runs and its
/// arguments; a story's first attempt commits its file, the fix-up the
/// `ok-<id>.txt` the gate wants.
const SESSION_AGENT: &str = r#"
printf '%s\n' "$@" > "$SCRATCH/argv-$ID-$N"
echo "$RALPH_TEST_NODE $(pwd)" > "$SCRATCH/where-$ID-$N"
printf '{"type":"system","subtype":"init","session_id":"sess-%s-%s","tools":["Bash"]}\n' "$ID" "$N"
if [ "$N" = 1 ]; then
  commit_file "src/$ID.txt"
else
  echo ok > "ok-$ID.txt"; git add "ok-$ID.txt"; git commit -qm "fix(story-$ID): ok"
fi
done_
"#;

#[test]
fn a_fixup_resumes_its_session_on_the_node_that_holds_it_or_starts_fresh() {
    let _one = ONE_CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let scratch = tempfile::tempdir().unwrap();
    let bin = tempfile::tempdir().unwrap();
    let Some(c) = Cluster::start(bin.path(), scratch.path()) else {
        return;
    };
    let on_w2 = r#"{ "ralph_slot": 1, "node_w2": 0.01 }"#;
    let anywhere = r#"{ "ralph_slot": 1 }"#;
    let p = project_with(
        &c,
        "# [batch:1]\n1.1 | a\n1.2 | b\n",
        SESSION_AGENT,
        RALPH,
        on_w2,
    );
    // A story lands once its tree has ok-<id>.txt for each src/<id>.txt.
    let set = |resources: &str| {
        let mut v: serde_json::Value = serde_json::from_str(&p.read(".ralph/config.json")).unwrap();
        v["validation"] = serde_json::json!({ "commands": [{ "name": "gate", "required": true,
            "cmd": "for f in src/*.txt; do test -f ok-$(basename $f .txt).txt || exit 1; done" }] });
        v["executor"]["ray"]["resources"] = serde_json::from_str(resources).unwrap();
        p.write(".ralph/config.json", &v.to_string());
        p.commit_all("config");
    };
    std::fs::copy(p.bin.join("claude"), bin.path().join("claude")).unwrap();
    let where_ = |id: &str, n: u32| {
        std::fs::read_to_string(scratch.path().join(format!("where-{id}-{n}")))
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    let argv = |id: &str, n: u32| {
        std::fs::read_to_string(scratch.path().join(format!("argv-{id}-{n}"))).unwrap_or_default()
    };

    // 1.1's first attempt runs on w2 (asked for), fails the gate, and the
    // run ends after it (-n 1), leaving a fix-up that resumes its session.
    set(on_w2);
    let r = run_to_end(&p, c.ralph(&p, &["run", "-s", "1.1", "-n", "1"]));
    assert_eq!(
        p.kinds("1.1"),
        vec!["first"],
        "{r:?}\n{}",
        p.read("ralph.log")
    );
    assert!(where_("1.1", 1).starts_with("w2 "), "{}", where_("1.1", 1));
    // Jobs may now go anywhere (the head is Ray's first choice): the
    // fix-up still goes to w2, into the same worker slot's worktree.
    set(anywhere);
    let r = run_to_end(&p, c.ralph(&p, &["run", "-s", "1.1"]));
    let shown = format!("{r:?}\n{}", p.read("ralph.log"));
    assert_eq!(r.code, 0, "{shown}");
    assert_eq!(p.kinds("1.1"), vec!["first", "fixup"], "{shown}");
    assert_eq!(where_("1.1", 2), where_("1.1", 1), "{shown}");
    assert!(
        argv("1.1", 2).starts_with("--resume\nsess-1.1-1\n"),
        "{}",
        argv("1.1", 2)
    );
    let hist = &p.story("1.1")["history"];
    assert_eq!(hist[1]["resumed"], true, "{shown}");
    // The node is on record: state, status --json and the run records.
    let node = hist[0]["node"].as_str().unwrap_or_default().to_string();
    assert!(node.starts_with("w2/"), "{hist}");
    assert_eq!(hist[1]["node"], node.as_str());
    let st = run_to_end(&p, p.command(&["status", "--json"]));
    let st: serde_json::Value = serde_json::from_str(&st.stdout).unwrap();
    let row = st["stories"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "1.1")
        .unwrap()
        .clone();
    assert_eq!(row["node"], node.as_str(), "{st}");
    let records: String = walk(&p.root.join(".ralph/runs"))
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap_or_default())
        .collect();
    assert!(
        records.contains(&format!("\"node\":\"{node}\"")),
        "{records}"
    );

    // 1.2's first attempt on w2 too; then w2 dies: its fix-up cannot
    // resume there and starts a fresh session elsewhere.
    set(on_w2);
    let r = run_to_end(&p, c.ralph(&p, &["run", "-s", "1.2", "-n", "1"]));
    assert_eq!(
        p.kinds("1.2"),
        vec!["first"],
        "{r:?}\n{}",
        p.read("ralph.log")
    );
    assert!(where_("1.2", 1).starts_with("w2 "));
    Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", c.env["W2_PGID"])])
        .status()
        .unwrap();
    wait_until(
        "the cluster to see w2 gone",
        Duration::from_secs(120),
        || {
            let v: serde_json::Value =
                serde_json::from_str(&c.api("/nodes?view=summary")).unwrap_or_default();
            v["data"]["summary"].as_array().is_some_and(|nodes| {
                nodes
                    .iter()
                    .filter(|n| n["raylet"]["state"] == "ALIVE")
                    .count()
                    == 1
            })
        },
    );
    set(anywhere);
    let r = run_to_end(&p, c.ralph(&p, &["run", "-s", "1.2"]));
    let shown = format!("{r:?}\n{}", p.read("ralph.log"));
    assert_eq!(r.code, 0, "{shown}");
    assert_eq!(p.kinds("1.2"), vec!["first", "fixup"], "{shown}");
    assert!(where_("1.2", 2).starts_with("head "), "{shown}");
    assert!(!argv("1.2", 2).contains("--resume"), "{}", argv("1.2", 2));
    assert_ne!(p.story("1.2")["history"][1]["resumed"], true, "{shown}");
    assert_eq!(p.merges_of("1.1"), 1);
    assert_eq!(p.merges_of("1.2"), 1);
}

/// Issue 35's figure: the requests a run makes to the dashboard while 8
/// jobs run at once (8 stories of a 10-second agent at `-j 8`, 4 slots a
/// node), from the `executor timing:` line ralph.log ends with. Not a test
/// of speed: run it by hand with
/// `cargo test --test it ray::dashboard_requests -- --ignored --nocapture`.
#[test]
#[ignore]
fn dashboard_requests_figures() {
    let _one = ONE_CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let scratch = tempfile::tempdir().unwrap();
    let bin = tempfile::tempdir().unwrap();
    let Some(c) = Cluster::start_with(bin.path(), scratch.path(), 4) else {
        return;
    };
    let mut queue = String::from("# [batch:1]\n");
    for i in 1..=8 {
        queue.push_str(&format!("1.{i} | s{i}\n"));
    }
    let agent = "sleep 10\ncommit_file \"src/$ID.txt\"\ndone_\n";
    let p = project(&c, &queue, agent);
    std::fs::copy(p.bin.join("claude"), bin.path().join("claude")).unwrap();
    let r = run_to_end(&p, c.ralph(&p, &["run", "-j", "8"]));
    assert_eq!(r.code, 0, "{r:?}\n{}", p.read("ralph.log"));
    assert_eq!(p.completed().len(), 8);
    let log = p.read("ralph.log");
    let line = log
        .lines()
        .find(|l| l.contains("executor timing:"))
        .unwrap_or("no executor timing line");
    println!("figures: 8 jobs of 10 s at once\n{line}");
}

/// Runs `f` with this thread in network namespace `ns`: a socket it opens
/// stays there (the scripted GitHub API the coordinator and the nodes
/// reach on the namespace's loopback).
fn in_namespace<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/var/run/netns/{ns}");
    std::thread::spawn(move || {
        use std::os::fd::AsRawFd;
        let file = std::fs::File::open(&path).expect("the namespace's file");
        // CLONE_NEWNET
        let rc = unsafe { setns(file.as_raw_fd(), 0x4000_0000) };
        assert_eq!(rc, 0, "setns {path}: {}", std::io::Error::last_os_error());
        f()
    })
    .join()
    .unwrap()
}

unsafe extern "C" {
    fn setns(fd: i32, nstype: i32) -> i32;
}

#[test]
fn a_github_backed_project_runs_on_ray() {
    use crate::github_api::{issue, Api, Server};
    const TOKEN: &str = "test-token-ray-0123456789";
    let _one = ONE_CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let scratch = tempfile::tempdir().unwrap();
    let bin = tempfile::tempdir().unwrap();
    let Some(c) = Cluster::start(bin.path(), scratch.path()) else {
        return;
    };
    let p = Project::new();
    let mut issues = vec![
        issue(1, "The first.", &["ralph"]),
        issue(2, "Second, blocked by #1.", &["ralph"]),
        issue(3, "Not a story.", &["bug"]),
    ];
    issues[1].blocked_by = vec![1];
    let api = Api {
        issues: issues.into_iter().map(|i| (i.number, i)).collect(),
        token: TOKEN.into(),
        ..Api::default()
    };
    let switches = p.scratch.clone();
    let server = in_namespace(c.ns(), move || Server::start(api, switches));
    p.write(
        ".ralph/config.json",
        &crate::harness::quiet_extras(&format!(
            r#"{{ "loop": {{ "max_retries": 1, "grace_seconds": 1 }},
  "backlog": {{ "source": "github",
    "github": {{ "repo": "o/r", "api_url": "{}", "poll_seconds": 0 }} }},
  "executor": {{ "kind": "ray",
    "ray": {{ "ralph_path": "{RALPH}", "resources": {{ "ralph_slot": 1 }} }} }} }}"#,
            server.url
        )),
    );
    p.agent("env > \"$SCRATCH/env-$ID\"\ncommit_file \"src/$ID.txt\" \"$ID on $RALPH_TEST_NODE\"\ndone_\n");
    p.commit_all("config");
    let (_, url) = c.relay("relay.git");
    git(&p.root, &["remote", "add", "origin", &url]);
    std::fs::copy(p.bin.join("claude"), bin.path().join("claude")).unwrap();
    let mut cmd = c.ralph(&p, &["run"]);
    cmd.env("GITHUB_TOKEN", TOKEN);
    let r = run_to_end(&p, cmd);
    let shown = format!("{r:?}\n{}", p.read("ralph.log"));
    assert_eq!(r.code, 0, "{shown}");
    let merged: Vec<String> = p
        .main_subjects()
        .iter()
        .filter_map(|s| s.strip_prefix("merge: story "))
        .map(|s| s.split_whitespace().next().unwrap_or_default().to_string())
        .collect();
    assert_eq!(merged, ["1", "2"], "{shown}");
    for n in [1, 2] {
        let i = server.issue(n);
        assert!(!i.open, "#{n} is closed: {i:?}\n{shown}");
        assert_eq!(i.comments.len(), 1, "#{n}: {i:?}");
        // The agent ran on a node.
        let env = std::fs::read_to_string(scratch.path().join(format!("env-{n}"))).unwrap();
        assert!(env.contains("RALPH_TEST_NODE="), "{env}");
        assert!(!env.contains(TOKEN), "the token reached agent {n}");
    }
    assert!(server.issue(3).open);
    // The tracker's token is in no job spec, log or record.
    let specs = c.api("/api/jobs/");
    assert!(!specs.contains(TOKEN), "a job spec holds the token");
    for f in walk(&p.root.join(".ralph"))
        .into_iter()
        .chain([p.root.join("ralph.log")])
    {
        let text = std::fs::read(&f).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&text).contains(TOKEN),
            "{} holds the token",
            f.display()
        );
    }
}

/// Story 1.1 raced by two candidates, "slow" and "fast" (`body` behaves
/// by `$M`), the agent on the nodes' PATH (`bin`).
fn racing_project(c: &Cluster, body: &str, bin: &Path) -> Project {
    let agent = format!("{}{body}", crate::harness::MODEL_AS_M);
    let p = project(c, "1.1 | Hard\n", &agent);
    let mut cfg: serde_json::Value = serde_json::from_str(&p.read(".ralph/config.json")).unwrap();
    cfg["attempts"] =
        serde_json::json!({ "best_of": 2, "candidates": ["claude:slow", "claude:fast"] });
    p.write(".ralph/config.json", &cfg.to_string());
    p.commit_all("best of 2");
    std::fs::copy(p.bin.join("claude"), bin.join("claude")).unwrap();
    p
}

/// No job of this project left on the cluster, no ref on the relay or on
/// the coordinator's landing pads.
fn nothing_left(c: &Cluster, p: &Project, shown: &str) {
    let left: Vec<serde_json::Value> = c
        .jobs()
        .into_iter()
        .filter(|j| j["metadata"]["ralph_story"].as_str().is_some())
        .collect();
    assert!(left.is_empty(), "jobs left: {left:?}\n{shown}");
    assert_eq!(relay_refs(c), Vec::<String>::new(), "{shown}");
    assert_eq!(p.refs("refs/ralph-relay/"), Vec::<String>::new());
}

/// Best of 2 on Ray: each candidate says which it is and where it runs,
/// then behaves by its model. "slow" commits, starts a child, and waits
/// until it is stopped; "fast" waits for that commit, then finishes.
const RACING_AGENT: &str = r#"
echo "$M $RALPH_CANDIDATE $RALPH_ATTEMPT $RALPH_TEST_NODE" >> "$SCRATCH/candidates"
case "$M" in
slow)
  commit_file "src/slow.txt" "slow on $RALPH_TEST_NODE"
  sleep 1000 & echo $! > "$SCRATCH/slow.pids"; echo $$ >> "$SCRATCH/slow.pids"
  touch "$SCRATCH/slow-committed"
  while :; do sleep 0.1; done ;;
fast)
  while [ ! -e "$SCRATCH/slow-committed" ] || [ ! -e "$SCRATCH/go" ]; do sleep 0.1; done
  commit_file "src/fast.txt" "fast on $RALPH_TEST_NODE"
  done_ ;;
esac
"#;

/// Issue 36 on Ray: each candidate is a job of its own (one slot per node,
/// so one on each node), on its own branch and relay refs, with
/// `RALPH_CANDIDATE` on the node. The fast one lands; the slow one's job is
/// stopped with its whole tree, no retry charged, its commit brought back
/// to `refs/ralph/candidates/1.1/1/1`; no job and no relay ref is left.
/// While both run, `status --json` names each one's node (the fast one
/// waits for `$SCRATCH/go` until the test has seen them).
#[test]
fn best_of_two_races_as_two_jobs_and_keeps_the_stopped_ones_work() {
    let _one = ONE_CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let scratch = tempfile::tempdir().unwrap();
    let bin = tempfile::tempdir().unwrap();
    let Some(c) = Cluster::start_with(bin.path(), scratch.path(), 1) else {
        return;
    };
    let p = racing_project(&c, RACING_AGENT, bin.path());
    let out = std::fs::File::create(p.scratch.join("out")).unwrap();
    let run = c
        .ralph(&p, &["run", "-j", "2"])
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .unwrap();
    // Each candidate's node, as `status --json` gives it and as its agent
    // says it runs on (`candidates`: "model k attempt node").
    let nodes_seen = || -> Option<Vec<(u64, String, String)>> {
        let o = c.ralph(&p, &["status", "--json"]).output().ok()?;
        let st: serde_json::Value = serde_json::from_slice(&o.stdout).ok()?;
        let said = std::fs::read_to_string(scratch.path().join("candidates")).ok()?;
        let rows = st["stories"][0]["candidates"].as_array()?.clone();
        let mut seen = Vec::new();
        for r in rows {
            let k = r["k"].as_u64()?;
            let line = said
                .lines()
                .find(|l| l.split(' ').nth(1) == Some(&k.to_string()))?;
            let ran_on = line.split(' ').nth(3)?.to_string();
            seen.push((k, r["node"].as_str()?.to_string(), ran_on));
        }
        (seen.len() == 2).then_some(seen)
    };
    let mut seen = Vec::new();
    wait_until(
        "status --json to name both candidates' nodes",
        Duration::from_secs(120),
        || {
            seen = nodes_seen().unwrap_or_default();
            !seen.is_empty()
        },
    );
    for (k, node, ran_on) in &seen {
        assert!(node.starts_with(&format!("{ran_on}/")), "{k}: {seen:?}");
    }
    std::fs::write(scratch.path().join("go"), "").unwrap();
    let r = run.wait_with_output().unwrap();
    assert_eq!(
        r.status.code(),
        Some(0),
        "{}\n{}",
        p.scratch_text("out"),
        p.read("ralph.log")
    );

    // The fast candidate's work landed, once, no failure charged.
    assert_eq!(p.completed(), ["1.1"]);
    assert_eq!(p.merges_of("1.1"), 1);
    assert!(p.file_on_main("src/fast.txt").is_some());
    assert_eq!(p.file_on_main("src/slow.txt"), None);
    assert_eq!(p.story("1.1")["attempts"], 0, "{}", p.read("ralph.log"));
    // Each candidate knew which it was, on a node of its own.
    let mut who: Vec<Vec<String>> = std::fs::read_to_string(scratch.path().join("candidates"))
        .unwrap()
        .lines()
        .map(|l| l.split(' ').map(String::from).collect())
        .collect();
    who.sort();
    assert_eq!(who.len(), 2, "{who:?}");
    assert_eq!(who[0][..3], ["fast", "2", "1"], "{who:?}");
    assert_eq!(who[1][..3], ["slow", "1", "1"], "{who:?}");
    assert_ne!(who[0][3], who[1][3], "both candidates ran on one node");
    // The records say where each ran, as the web view folds them.
    let mut placed: Vec<(u64, String)> = crate::harness::run_records(&p)
        .iter()
        .filter(|r| r["ev"] == "candidate_placed")
        .map(|r| {
            (
                r["candidate"].as_u64().unwrap(),
                r["node"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    placed.sort();
    let mut seen: Vec<(u64, String)> = seen.into_iter().map(|(k, n, _)| (k, n)).collect();
    seen.sort();
    assert_eq!(placed, seen);
    // The slow one was stopped, its whole tree gone.
    let pids = crate::harness::pids_in(&scratch.path().join("slow.pids"));
    assert_eq!(pids.len(), 2, "{pids:?}");
    for pid in pids {
        wait_until(
            "the slow candidate's tree gone",
            Duration::from_secs(60),
            || !crate::harness::alive(pid),
        );
    }
    assert_eq!(
        crate::harness::candidate_ends(&p),
        [
            (1, "stopped".to_string(), false),
            (2, "won".to_string(), true)
        ],
        "{}",
        p.read("ralph.log")
    );
    // Its commit came back through the relay and is kept.
    let kept = "refs/ralph/candidates/1.1/1/1";
    assert_eq!(
        git(&p.root, &["show", &format!("{kept}:src/slow.txt")]),
        format!("slow on {}\n", who[1][3]),
        "{}",
        p.read("ralph.log")
    );
    // Each candidate's log is its own.
    for k in [1, 2] {
        let log = p.root.join(format!(".ralph/logs/1.1/attempt-1-c{k}.log"));
        assert!(log.exists(), "{}", log.display());
    }
    // Nothing left behind: no job of this project, no relay ref.
    nothing_left(&c, &p, "");
}

/// A race's candidates by attempt: "slow" commits and works until it is
/// stopped; "fast" finishes once `$SCRATCH/go-<attempt>` is there.
const RACE_BY_ATTEMPT_AGENT: &str = r#"
echo "$M $RALPH_CANDIDATE $RALPH_ATTEMPT" >> "$SCRATCH/candidates"
touch "$SCRATCH/$M-$RALPH_ATTEMPT"
case "$M" in
slow)
  commit_file "src/slow-$RALPH_ATTEMPT.txt"
  touch "$SCRATCH/slow-committed-$RALPH_ATTEMPT"
  while :; do sleep 0.1; done ;;
fast)
  while [ ! -e "$SCRATCH/go-$RALPH_ATTEMPT" ]; do sleep 0.1; done
  commit_file "src/fast.txt"; done_ ;;
esac
"#;

/// A coordinator killed mid-race: the next run claims none of its
/// candidates' jobs (a race starts afresh), stops them, keeps each one's
/// log as the candidate's and brings what each committed home as kept
/// refs, and its own race lands. Nothing is left on the cluster or relay.
#[test]
fn a_race_whose_coordinator_was_killed_races_afresh_and_keeps_the_old_work() {
    let _one = ONE_CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let scratch = tempfile::tempdir().unwrap();
    let bin = tempfile::tempdir().unwrap();
    let Some(c) = Cluster::start(bin.path(), scratch.path()) else {
        return;
    };
    let p = racing_project(&c, RACE_BY_ATTEMPT_AGENT, bin.path());
    let mut first = c
        .ralph(&p, &["run", "-j", "2"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let there = |name: &str| scratch.path().join(name).exists();
    wait_until("both candidates at work", Duration::from_secs(120), || {
        there("slow-committed-1") && there("fast-1")
    });
    // SIGKILL: both candidates' jobs run on with no coordinator.
    first.kill().unwrap();
    first.wait().unwrap();
    std::fs::write(scratch.path().join("go-2"), "").unwrap();
    let r = run_to_end(&p, c.ralph(&p, &["run", "-j", "2"]));
    let shown = format!("{r:?}\n{}", p.read("ralph.log"));
    assert_eq!(r.code, 0, "{shown}");
    assert_eq!(p.completed(), ["1.1"], "{shown}");
    assert_eq!(p.merges_of("1.1"), 1, "{shown}");
    assert_eq!(p.file_on_main("src/slow-1.txt"), None);
    // The new race's slow candidate is kept as any stopped candidate is.
    assert_eq!(
        git(
            &p.root,
            &["show", "refs/ralph/candidates/1.1/2/1:src/slow-2.txt"]
        ),
        "1.1\n",
        "{shown}"
    );
    // The old race's: its commit came home, its log is the candidate's.
    assert_eq!(
        git(
            &p.root,
            &["show", "refs/ralph/attempts/1.1@c1/1:src/slow-1.txt"]
        ),
        "1.1\n",
        "{shown}"
    );
    for k in [1, 2] {
        let log = p.root.join(format!(".ralph/logs/1.1/attempt-1-c{k}.log"));
        assert!(log.exists(), "{}\n{shown}", log.display());
    }
    nothing_left(&c, &p, &shown);
}
