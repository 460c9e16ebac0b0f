//! The Jobs REST API of a Ray cluster (issue 23), as `exec/ray.rs` uses
//! it: the calls (version, packages, submit, info, logs, stop, delete, the
//! job list and the nodes), and the pure readings of their answers (this
//! project's jobs of an earlier run, a node offering a resource) and the
//! job spec ralph submits.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use crate::config::RaySettings;
use crate::error::RalphError;

/// The Jobs API version ralph speaks (`GET /api/version`).
const JOBS_API_VERSION: &str = "4";
/// The most the dashboard reads in one request (`DASHBOARD_CLIENT_MAX_SIZE`).
const UPLOAD_MAX: usize = 100 << 20;

/// How long the dashboard may take to accept a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one call may take in all (a job's log with its report is
/// the largest answer); the job list's poll and every watch go on meanwhile.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// How long uploading ralph (up to `UPLOAD_MAX`) may take.
const UPLOAD_TIMEOUT: Duration = Duration::from_secs(600);
/// The most of an answer read (a job's log carries its attempt's log).
const ANSWER_MAX: u64 = 256 << 20;

/// The Jobs API of one cluster.
#[derive(Debug, Clone)]
pub(crate) struct Cluster {
    agent: ureq::Agent,
    /// The dashboard's URL, without a trailing slash (a path prefix behind
    /// a proxy stays).
    base: String,
    /// The token's value: kept in memory only.
    token: Option<String>,
    pub(crate) address: String,
    /// Requests made, by kind (`GET /api/jobs/{}`...): the figure of
    /// issue 35's "one job list per poll", said at the run's end.
    counts: Arc<Mutex<BTreeMap<String, u64>>>,
}

/// What `GET /api/jobs/{id}` says.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct JobInfo {
    pub(crate) status: String,
    pub(crate) message: String,
}

impl JobInfo {
    pub(crate) fn finished(&self) -> bool {
        matches!(self.status.as_str(), "SUCCEEDED" | "FAILED" | "STOPPED")
    }

    fn of(v: &Value) -> JobInfo {
        JobInfo {
            status: v["status"].as_str().unwrap_or("").to_string(),
            message: v["message"].as_str().unwrap_or("").to_string(),
        }
    }
}

/// A job this project submitted before this run started.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Orphan {
    pub(crate) submission_id: String,
    pub(crate) attempt: u32,
}

/// The dashboard's address checked: an http(s) URL with a host.
pub(crate) fn parse_address(url: &str) -> Result<String, String> {
    let uri: ureq::http::Uri = url
        .parse()
        .map_err(|e| format!("{url:?} is not a URL: {e}"))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none_or(str::is_empty) {
        return Err(format!(
            "{url:?} is not an http:// or https:// URL with a host"
        ));
    }
    Ok(url.trim_end_matches('/').to_string())
}

impl Cluster {
    /// The cluster of `settings`; the token from the variable it names.
    pub(crate) fn new(settings: &RaySettings) -> Result<Cluster, RalphError> {
        let base = parse_address(&settings.address).map_err(|e| {
            RalphError::usage(format!("executor.ray.address: {e}"))
                .with_hint("set it to the dashboard's http:// address, e.g. http://127.0.0.1:8265")
        })?;
        let token = std::env::var(&settings.token_env)
            .ok()
            .filter(|t| !t.trim().is_empty());
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(CONNECT_TIMEOUT))
            .timeout_global(Some(CALL_TIMEOUT))
            .user_agent(concat!("ralph/", env!("CARGO_PKG_VERSION")))
            .build();
        Ok(Cluster {
            agent: ureq::Agent::new_with_config(config),
            base,
            token,
            address: settings.address.clone(),
            counts: Arc::default(),
        })
    }

    /// One request; the token goes in `Authorization` and nowhere else
    /// (ureq's errors name the host and the failure, never a header).
    fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<(&[u8], &str)>,
        timeout: Duration,
    ) -> Result<(u16, Vec<u8>), String> {
        self.count(method, path);
        let mut req = ureq::http::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .header("Accept", "application/json");
        if let Some(t) = &self.token {
            req = req.header("Authorization", format!("Bearer {t}"));
        }
        let fail = |e: String| format!("Ray at {}: {e}", self.address);
        let result = match body {
            Some((bytes, kind)) => {
                let req = req
                    .header("Content-Type", kind)
                    .body(bytes.to_vec())
                    .map_err(|e| fail(e.to_string()))?;
                run_within(&self.agent, req, timeout)
            }
            None => {
                let req = req.body(()).map_err(|e| fail(e.to_string()))?;
                run_within(&self.agent, req, timeout)
            }
        };
        let mut resp = result.map_err(|e| fail(e.to_string()))?;
        let status = resp.status().as_u16();
        let bytes = resp
            .body_mut()
            .with_config()
            .limit(ANSWER_MAX)
            .read_to_vec()
            .map_err(|e| fail(e.to_string()))?;
        Ok((status, bytes))
    }

    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Result<(u16, Value), String> {
        let bytes = body.map(|b| serde_json::to_vec(b).unwrap_or_default());
        let (status, raw) = self.send(
            method,
            path,
            bytes.as_deref().map(|b| (b, "application/json")),
            CALL_TIMEOUT,
        )?;
        let v = serde_json::from_slice(&raw)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&raw).into_owned()));
        Ok((status, v))
    }

    /// Counts a request under its kind: the path with a job's name as `{}`.
    fn count(&self, method: &str, path: &str) {
        let path = path.split('?').next().unwrap_or(path);
        let kind = match path.strip_prefix("/api/jobs/").filter(|r| !r.is_empty()) {
            Some(rest) => match rest.split_once('/') {
                Some((_, tail)) => format!("{method} /api/jobs/{{}}/{tail}"),
                None => format!("{method} /api/jobs/{{}}"),
            },
            None if path.starts_with("/api/packages/") => format!("{method} /api/packages/{{}}"),
            None => format!("{method} {path}"),
        };
        *self
            .counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(kind)
            .or_default() += 1;
    }

    /// The requests made so far, by kind.
    pub(crate) fn counts(&self) -> BTreeMap<String, u64> {
        self.counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Reachable, the token accepted, a Jobs API ralph speaks (`version` 4);
    /// the Ray version (`GET /api/version`).
    pub(crate) fn check(&self) -> Result<String, RalphError> {
        let (status, v) = self.call("GET", "/api/version", None).map_err(|e| {
            RalphError::usage(e)
                .with_hint("start the cluster (`ray start --head`) or fix executor.ray.address")
        })?;
        match status {
            200 if v["version"].as_str() != Some(JOBS_API_VERSION) => {
                Err(RalphError::usage(format!(
                    "Ray at {} speaks Jobs API version {} (ray {}); ralph speaks version \
                     {JOBS_API_VERSION} (Ray 2.x)",
                    self.address, v["version"], v["ray_version"]
                ))
                .with_hint("run a Ray 2 cluster (ralph is tested with Ray 2.60)"))
            }
            200 => Ok(v["ray_version"].as_str().unwrap_or("?").to_string()),
            401 | 403 => Err(RalphError::usage(format!(
                "Ray at {} refused ralph's token (HTTP {status})",
                self.address
            ))
            .with_hint(
                "export the cluster's token in the variable executor.ray.token_env names \
                 (RAY_AUTH_TOKEN by default)",
            )),
            s => Err(RalphError::usage(format!(
                "Ray at {} answered HTTP {s} to /api/version: {v}",
                self.address
            ))
            .with_hint("is executor.ray.address the dashboard's address (port 8265)?")),
        }
    }

    /// Uploads this very binary as a `working_dir` package unless the
    /// cluster has it; its URI.
    pub(crate) fn upload_self(&self) -> Result<String, String> {
        let exe = std::env::current_exe().map_err(|e| format!("ralph's own path: {e}"))?;
        let bytes = std::fs::read(&exe).map_err(|e| format!("{}: {e}", exe.display()))?;
        let name = super::package::package_name(&bytes);
        let path = format!("/api/packages/gcs/{name}");
        let (status, _) = self.call("GET", &path, None)?;
        if status != 200 {
            let zip = super::package::zip_one("ralph", &bytes);
            drop(bytes);
            if zip.len() > UPLOAD_MAX {
                return Err(format!(
                    "ralph packed is {} MiB, more than the {} MiB the dashboard takes",
                    zip.len() >> 20,
                    UPLOAD_MAX >> 20
                ));
            }
            let (status, answer) = self.send(
                "PUT",
                &path,
                Some((&zip, "application/zip")),
                UPLOAD_TIMEOUT,
            )?;
            if status != 200 {
                return Err(format!(
                    "uploading ralph: HTTP {status}: {}",
                    String::from_utf8_lossy(&answer)
                ));
            }
        }
        Ok(format!("gcs://{name}"))
    }

    pub(crate) fn submit(&self, job: &Value) -> Result<(), String> {
        let (status, v) = self.call("POST", "/api/jobs/", Some(job))?;
        if status == 200 {
            Ok(())
        } else {
            Err(format!("HTTP {status}: {v}"))
        }
    }

    /// `None` when the cluster knows no such job.
    pub(crate) fn info(&self, id: &str) -> Result<Option<JobInfo>, String> {
        let (status, v) = self.call("GET", &format!("/api/jobs/{id}"), None)?;
        match status {
            200 => Ok(Some(JobInfo::of(&v))),
            404 => Ok(None),
            s => Err(format!("HTTP {s}: {v}")),
        }
    }

    pub(crate) fn logs(&self, id: &str) -> Result<String, String> {
        let (status, v) = self.call("GET", &format!("/api/jobs/{id}/logs"), None)?;
        match status {
            200 => Ok(v["logs"].as_str().unwrap_or("").to_string()),
            s => Err(format!("HTTP {s}: {v}")),
        }
    }

    pub(crate) fn stop(&self, id: &str) -> Result<(), String> {
        self.call("POST", &format!("/api/jobs/{id}/stop"), None)
            .map(|_| ())
    }

    pub(crate) fn delete(&self, id: &str) -> Result<(), String> {
        self.call("DELETE", &format!("/api/jobs/{id}"), None)
            .map(|_| ())
    }

    /// Whether a live node offers `resource` (`GET /nodes?view=summary`).
    pub(crate) fn node_offers(&self, resource: &str) -> Result<bool, String> {
        Ok(offers(&self.nodes()?, resource, 0.0))
    }

    /// This project's jobs the cluster still holds, by story.
    pub(crate) fn orphans(&self, tag: &str) -> Result<HashMap<String, Orphan>, String> {
        Ok(orphans_of(&self.jobs()?, tag))
    }

    /// This project's validation jobs the cluster still holds (a crashed
    /// run's: `validations_of`).
    pub(crate) fn validations(&self, tag: &str) -> Result<Vec<(String, Orphan)>, String> {
        Ok(validations_of(&self.jobs()?, tag))
    }

    /// Every job the cluster holds, by submission ID (`exec/ray/board.rs`).
    pub(crate) fn list(&self) -> Result<HashMap<String, JobInfo>, String> {
        Ok(listing_of(&self.jobs()?))
    }

    /// `GET /api/jobs/`: the cluster's jobs.
    fn jobs(&self) -> Result<Value, String> {
        let (status, v) = self.call("GET", "/api/jobs/", None)?;
        if status != 200 {
            return Err(format!("HTTP {status}: {v}"));
        }
        Ok(v)
    }

    /// The live nodes' resources (`GET /nodes?view=summary`'s `data`).
    pub(crate) fn nodes(&self) -> Result<Value, String> {
        let (status, v) = self.call("GET", "/nodes?view=summary", None)?;
        if status != 200 {
            return Err(format!("HTTP {status}: {v}"));
        }
        Ok(v["data"].clone())
    }
}

/// The jobs of a `GET /api/jobs/` answer by submission ID (drivers, which
/// have none, left out).
pub(crate) fn listing_of(list: &Value) -> HashMap<String, JobInfo> {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(|j| Some((j["submission_id"].as_str()?.to_string(), JobInfo::of(j))))
        .collect()
}

/// The jobs in a `GET /api/jobs/` answer that this project (`tag`)
/// submitted, the latest attempt per story.
pub(crate) fn orphans_of(list: &Value, tag: &str) -> HashMap<String, Orphan> {
    let mut out: HashMap<String, Orphan> = HashMap::new();
    for job in list.as_array().into_iter().flatten() {
        let m = &job["metadata"];
        if m["ralph_project"].as_str() != Some(tag) {
            continue;
        }
        let (Some(id), Some(n), Some(sid)) = (
            m["ralph_story"].as_str(),
            m["ralph_attempt"]
                .as_str()
                .and_then(|n| n.parse::<u32>().ok()),
            job["submission_id"].as_str(),
        ) else {
            continue;
        };
        let newer = out.get(id).is_none_or(|o| o.attempt < n);
        if newer {
            out.insert(
                id.to_string(),
                Orphan {
                    submission_id: sid.to_string(),
                    attempt: n,
                },
            );
        }
    }
    out
}

/// What names a crashed run's validation job among the leftovers to stop
/// (story IDs hold no space).
pub(crate) const VALIDATION_OF: &str = "validation of ";

/// The validation jobs in a `GET /api/jobs/` answer that this project
/// (`tag`) submitted (their metadata's `ralph_validation` names the
/// candidate's top story), each as a leftover named `VALIDATION_OF` + story.
pub(crate) fn validations_of(list: &Value, tag: &str) -> Vec<(String, Orphan)> {
    let mut out: Vec<(String, Orphan)> = list
        .as_array()
        .into_iter()
        .flatten()
        .filter(|job| job["metadata"]["ralph_project"].as_str() == Some(tag))
        .filter_map(|job| {
            let story = job["metadata"]["ralph_validation"].as_str()?;
            let sid = job["submission_id"].as_str()?;
            Some((
                format!("{VALIDATION_OF}{story}"),
                Orphan {
                    submission_id: sid.to_string(),
                    attempt: 0,
                },
            ))
        })
        .collect();
    out.sort_by(|a, b| a.1.submission_id.cmp(&b.1.submission_id));
    out
}

/// Whether a node alive in a `/nodes?view=summary` answer's `data` has
/// at least `amount` of `resource` in all: in the logical resources the
/// answer prints per node (`available/total name` lines, exact names),
/// else in the node's total resources, whose names the dashboard
/// camel-cases (`ralph_node_w2` is `ralphNodeW2` there).
pub(crate) fn offers(data: &Value, resource: &str, amount: f64) -> bool {
    let camel = camel_case(resource);
    data["summary"].as_array().into_iter().flatten().any(|n| {
        let raylet = &n["raylet"];
        if raylet["state"].as_str() != Some("ALIVE") {
            return false;
        }
        let id = raylet["nodeId"].as_str().unwrap_or("");
        let total = match data["nodeLogicalResources"][id].as_str() {
            Some(text) => text.lines().find_map(|l| {
                let mut words = l.split_whitespace();
                let (amounts, name) = (words.next()?, words.next()?);
                let total = amounts.rsplit_once('/').map_or(amounts, |(_, t)| t);
                (name == resource).then(|| total.parse::<f64>().unwrap_or(0.0))
            }),
            None => {
                let totals = &raylet["resourcesTotal"];
                totals
                    .get(resource)
                    .or_else(|| totals.get(&camel))
                    .map(|v| v.as_f64().unwrap_or(0.0))
            }
        };
        total.is_some_and(|t| t >= amount)
    })
}

/// `ralph_node_w2` as the dashboard's JSON spells it: `ralphNodeW2`.
fn camel_case(name: &str) -> String {
    let mut out = String::new();
    let mut up = false;
    for c in name.chars() {
        match c {
            '_' => up = true,
            c if up => {
                out.extend(c.to_uppercase());
                up = false;
            }
            c => out.push(c),
        }
    }
    out
}

/// The per-node resource of node `name` (`worker::node_name`): every node
/// that is to resume its own sessions is started with it.
pub(crate) fn node_resource(name: &str) -> String {
    format!("ralph_node_{name}")
}

/// `<node>/<worker slot>` (`AttemptReport::node`) taken apart.
pub(crate) fn split_node(on: &str) -> (&str, Option<usize>) {
    match on.rsplit_once('/') {
        Some((name, slot)) => (name, slot.parse().ok()),
        None => (on, None),
    }
}

/// The job of attempt `n` of story `id`: the same name after a restart.
pub(crate) fn submission_id(tag: &str, id: &str, n: u32) -> String {
    format!("{tag}{id}-{n}")
}

/// The job's JSON: names, commits and the worker's command; never a secret.
#[allow(clippy::too_many_arguments)]
pub(crate) fn job_spec(
    sid: &str,
    entrypoint: String,
    resources: &[(String, f64)],
    package: Option<&str>,
    stop_wait: Duration,
    tag: &str,
    id: &str,
    n: u32,
) -> Value {
    let res: serde_json::Map<String, Value> = resources
        .iter()
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    let mut spec = json!({
        "submission_id": sid,
        "entrypoint": entrypoint,
        "entrypoint_num_cpus": 0,
        "entrypoint_resources": res,
        "metadata": {
            "ralph_project": tag,
            "ralph_story": id,
            "ralph_attempt": n.to_string(),
        },
    });
    // Ray's stop sends SIGTERM, then SIGKILL after this long (3 s by
    // default): the worker needs the agent's grace and the time to keep
    // and push what the agent left.
    spec["runtime_env"] = json!({ "env_vars": {
        "RAY_JOB_STOP_WAIT_TIME_S": stop_wait.as_secs().to_string(),
    } });
    if let Some(uri) = package {
        spec["runtime_env"]["working_dir"] = json!(uri);
    }
    spec
}

/// `req` sent with its own time limit (an upload gets longer than a poll).
fn run_within<B: ureq::AsSendBody>(
    agent: &ureq::Agent,
    req: ureq::http::Request<B>,
    timeout: Duration,
) -> Result<ureq::http::Response<ureq::Body>, ureq::Error> {
    agent.run(
        agent
            .configure_request(req)
            .timeout_global(Some(timeout))
            .build(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_spec_holds_names_not_secrets() {
        let spec = job_spec(
            "ralph-1a2b3c4d-1.2-3",
            "ralph worker attempt 00".into(),
            &[("ralph_slot".into(), 1.0)],
            None,
            Duration::from_secs(40),
            "ralph-1a2b3c4d-",
            "1.2",
            3,
        );
        assert_eq!(spec["entrypoint_resources"]["ralph_slot"], 1.0);
        assert_eq!(spec["metadata"]["ralph_attempt"], "3");
        assert_eq!(
            spec["runtime_env"],
            json!({ "env_vars": { "RAY_JOB_STOP_WAIT_TIME_S": "40" } })
        );
    }

    #[test]
    fn orphans_are_this_projects_latest_jobs() {
        let list = json!([
            {"submission_id": "a", "metadata": {"ralph_project": "p-", "ralph_story": "1", "ralph_attempt": "1"}},
            {"submission_id": "b", "metadata": {"ralph_project": "p-", "ralph_story": "1", "ralph_attempt": "2"}},
            {"submission_id": "c", "metadata": {"ralph_project": "q-", "ralph_story": "2", "ralph_attempt": "1"}},
            {"submission_id": "d", "metadata": null},
        ]);
        let o = orphans_of(&list, "p-");
        assert_eq!(o.len(), 1);
        assert_eq!(
            o["1"],
            Orphan {
                submission_id: "b".into(),
                attempt: 2
            }
        );
    }

    #[test]
    fn a_validation_job_is_no_attempts_orphan_but_a_leftover() {
        let list = json!([
            {"submission_id": "v", "metadata": {"ralph_project": "p-", "ralph_validation": "1.2"}},
            {"submission_id": "w", "metadata": {"ralph_project": "q-", "ralph_validation": "1.2"}},
            {"submission_id": "a", "metadata": {"ralph_project": "p-", "ralph_story": "1", "ralph_attempt": "1"}},
        ]);
        assert_eq!(orphans_of(&list, "p-").len(), 1, "the attempt's only");
        assert_eq!(
            validations_of(&list, "p-"),
            [(
                "validation of 1.2".to_string(),
                Orphan {
                    submission_id: "v".into(),
                    attempt: 0
                }
            )]
        );
    }

    #[test]
    fn a_node_offers_a_resource_only_while_alive() {
        // As Ray 2.60 answers: resource names camel-cased in the totals.
        let data = json!({ "summary": [
            { "raylet": { "state": "ALIVE", "nodeId": "a",
                "resourcesTotal": { "ralphNodeHead": 1.0, "ralphSlot": 2.0 } } },
            { "raylet": { "state": "DEAD", "nodeId": "b",
                "resourcesTotal": { "ralphNodeW2": 1.0 } } },
            { "raylet": { "state": "ALIVE", "nodeId": "c" } },
        ], "nodeLogicalResources": {
            "b": "0.0/1.0 ralph_node_w2",
            "c": "0.0/1.0 ralph_node_w3\n0.0/2.0 CPU" } });
        assert!(offers(&data, "ralph_node_head", 0.0));
        assert!(!offers(&data, "ralph_node_w2", 0.0));
        assert!(offers(&data, "ralph_node_w3", 0.0));
        assert!(!offers(&data, "ralph_node_w4", 0.0));
        // Enough of it, on one node.
        assert!(offers(&data, "ralph_slot", 2.0));
        assert!(!offers(&data, "ralph_slot", 3.0));
        assert!(offers(&data, "CPU", 2.0));
        assert!(!offers(&data, "CPU", 2.5));
        assert_eq!(split_node("w2/1"), ("w2", Some(1)));
        assert_eq!(split_node("w2"), ("w2", None));
        assert_eq!(node_resource("w2"), "ralph_node_w2");
    }

    #[test]
    fn the_job_list_is_read_by_submission_id() {
        let list = json!([
            {"submission_id": "a", "status": "RUNNING", "message": "m"},
            {"submission_id": null, "status": "RUNNING", "type": "DRIVER"},
            {"submission_id": "b", "status": "STOPPED"},
        ]);
        let l = listing_of(&list);
        assert_eq!(l.len(), 2);
        assert_eq!(
            l["a"],
            JobInfo {
                status: "RUNNING".into(),
                message: "m".into()
            }
        );
        assert!(l["b"].finished());
    }

    #[test]
    fn a_dashboard_address_is_an_http_url_with_a_host() {
        assert_eq!(
            parse_address("http://127.0.0.1:8265/").unwrap(),
            "http://127.0.0.1:8265"
        );
        assert_eq!(
            parse_address("https://ray.internal/ray").unwrap(),
            "https://ray.internal/ray"
        );
        assert!(parse_address("ray.internal:8265").is_err());
        assert!(parse_address("http://").is_err());
        assert!(parse_address("ftp://x").is_err());
    }

    #[test]
    fn requests_are_counted_by_kind_never_by_job() {
        let c = Cluster::new(&RaySettings {
            address: "http://127.0.0.1:8265".into(),
            token_env: "NO_SUCH_RAY_TOKEN_IN_THIS_TEST".into(),
            ralph_path: String::new(),
            resources: Vec::new(),
            relay: "origin".into(),
        })
        .unwrap();
        for path in [
            "/api/jobs/",
            "/api/jobs/p-1-1",
            "/api/jobs/p-2-1",
            "/api/jobs/p-1-1/logs",
        ] {
            c.count("GET", path);
        }
        c.count("GET", "/nodes?view=summary");
        c.count("PUT", "/api/packages/gcs/_ray_pkg_1.zip");
        let kinds: Vec<(String, u64)> = c.counts().into_iter().collect();
        let want = [
            ("GET /api/jobs/", 1),
            ("GET /api/jobs/{}", 2),
            ("GET /api/jobs/{}/logs", 1),
            ("GET /nodes", 1),
            ("PUT /api/packages/{}", 1),
        ];
        assert_eq!(kinds, want.map(|(k, n)| (k.to_string(), n)).to_vec());
    }

    #[test]
    fn a_submission_id_is_stable() {
        assert_eq!(
            submission_id("ralph-1a2b3c4d-", "1.2", 3),
            "ralph-1a2b3c4d-1.2-3"
        );
    }
}
