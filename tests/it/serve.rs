//! The live web view (issue 24): `ralph run --serve` and `ralph serve` on
//! real runs, the page checked in a real headless Chromium driven over its
//! DevTools pipe (the page stays open while the run goes on, so what it
//! shows came through the event stream), the token, redaction.

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::harness::*;

const LIMIT: Duration = Duration::from_secs(120);

/// A headless Chromium with one page open, spoken to over its DevTools
/// pipe (file descriptors 3 and 4: NUL-terminated JSON messages).
pub struct Browser {
    child: Child,
    to: std::io::PipeWriter,
    from: BufReader<std::io::PipeReader>,
    next: u64,
    session: String,
    _profile: tempfile::TempDir,
}

impl Browser {
    pub fn open(chrome: &Path, url: &str) -> Browser {
        use std::os::fd::AsRawFd;
        use std::os::unix::process::CommandExt;
        let profile = tempfile::tempdir().unwrap();
        let (their_in, to) = std::io::pipe().unwrap();
        let (from, their_out) = std::io::pipe().unwrap();
        let (r, w) = (their_in.as_raw_fd(), their_out.as_raw_fd());
        let mut c = Command::new(chrome);
        c.args([
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--no-first-run",
            "--remote-debugging-pipe",
            "--window-size=1400,1000",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("about:blank")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            c.pre_exec(move || {
                // Out of the way first, so neither lands on the other's number.
                let a = libc::fcntl(r, libc::F_DUPFD, 10);
                let b = libc::fcntl(w, libc::F_DUPFD, 10);
                if a < 0 || b < 0 || libc::dup2(a, 3) < 0 || libc::dup2(b, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = c.spawn().expect("chromium runs");
        drop((their_in, their_out));
        let mut b = Browser {
            child,
            to,
            from: BufReader::new(from),
            next: 0,
            session: String::new(),
            _profile: profile,
        };
        let target = b.call("Target.createTarget", json!({ "url": url }))["targetId"].clone();
        let session = b.call(
            "Target.attachToTarget",
            json!({ "targetId": target, "flatten": true }),
        )["sessionId"]
            .as_str()
            .unwrap()
            .to_string();
        b.session = session;
        b
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let mut msg = json!({ "id": id, "method": method, "params": params });
        if !self.session.is_empty() {
            msg["sessionId"] = json!(self.session);
        }
        let mut bytes = msg.to_string().into_bytes();
        bytes.push(0);
        self.to.write_all(&bytes).expect("chromium reads its pipe");
        loop {
            let mut buf = Vec::new();
            let n = self.from.read_until(0, &mut buf).unwrap();
            assert!(n > 0, "chromium closed its pipe");
            buf.pop();
            let v: Value = serde_json::from_slice(&buf).unwrap();
            if v["id"] == json!(id) {
                assert!(v.get("error").is_none(), "{method}: {v}");
                return v["result"].clone();
            }
        }
    }

    /// The value of a JavaScript expression in the page.
    pub fn eval(&mut self, expr: &str) -> Value {
        self.call(
            "Runtime.evaluate",
            json!({ "expression": expr, "returnByValue": true }),
        )["result"]["value"]
            .clone()
    }

    /// Every story row of the page: (id, status).
    pub fn rows(&mut self) -> Vec<(String, String)> {
        let v = self.eval(
            "Array.from(document.querySelectorAll('#stories tbody tr')).map(r => [r.dataset.id, r.dataset.status])",
        );
        v.as_array()
            .map(|a| {
                a.iter()
                    .map(|p| {
                        (
                            p[0].as_str().unwrap_or("").to_string(),
                            p[1].as_str().unwrap_or("").to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn screenshot(&mut self, png: &Path) {
        let data = self.call("Page.captureScreenshot", json!({ "format": "png" }))["data"]
            .as_str()
            .unwrap()
            .to_string();
        fs::write(png, base64(&data)).unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn base64(s: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        _ => 63,
    };
    let clean: Vec<u8> = s.bytes().filter(|&c| c != b'=' && c != b'\n').collect();
    let mut out = Vec::with_capacity(clean.len() * 3 / 4);
    for chunk in clean.chunks(4) {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= (val(c) as u32) << (18 - 6 * i);
        }
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..chunk.len() - 1]);
    }
    out
}

/// An HTTP/1.1 request to the server; (status, body).
pub fn http(
    url_base: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let host = url_base
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let mut s = TcpStream::connect(&host).expect("the server accepts");
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = out
        .split_once("\r\n\r\n")
        .map(|x| x.1)
        .unwrap_or("")
        .to_string();
    (status, body)
}

/// A ralph command started in the background, its stderr in a file.
pub struct Bg {
    pub child: Child,
    pub err: PathBuf,
}

impl Bg {
    pub fn start(p: &Project, args: &[&str], env: &[(&str, &str)]) -> Bg {
        let err = p.scratch.join(format!("stderr-{}", args[0]));
        let mut c = p.command(args);
        for (k, v) in env {
            c.env(k, v);
        }
        let child = c
            .stdout(Stdio::null())
            .stderr(fs::File::create(&err).unwrap())
            .spawn()
            .expect("ralph runs");
        Bg { child, err }
    }

    /// The page's URL, once ralph printed it.
    pub fn url(&self) -> String {
        let mut url = String::new();
        wait_until("the web view's URL", LIMIT, || {
            let text = fs::read_to_string(&self.err).unwrap_or_default();
            if let Some(line) = text.lines().find_map(|l| l.strip_prefix("web view: ")) {
                url = line.trim().to_string();
            }
            !url.is_empty()
        });
        url
    }

    pub fn wait(mut self) -> i32 {
        wait_for_exit(&mut self.child, "ralph to end", Duration::from_secs(300))
            .code()
            .unwrap_or(-1)
    }
}

impl Drop for Bg {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The path and query of `url` (`/?token=...`), and the token.
fn token_of(url: &str) -> String {
    url.split("token=").nth(1).unwrap_or("").to_string()
}

fn base(url: &str) -> String {
    url.split("/?").next().unwrap().to_string()
}

/// An agent that waits for `$SCRATCH/go` before it finishes its story.
const SLOW_AGENT: &str = r#"
touch "$SCRATCH/$ID-started"
echo "working on $ID"
while [ ! -e "$SCRATCH/go" ]; do sleep 0.02; done
commit_file "src/$ID.txt"
done_
"#;

#[test]
fn the_page_shows_every_story_with_its_status_pushed_during_the_run() {
    let Some(chrome) = chromium("the page") else {
        return;
    };
    let p = Project::with_backlog(
        "# [batch:1]\n1.1 | First\n1.2 | Second\n2.1 | After <both> & more\n",
        r#"{ "loop": { "max_retries": 2, "grace_seconds": 1 }, "budget": { "max_cost_usd": 5 } }"#,
    );
    p.write(
        "specs/epic-2/story-2.1-spec.md",
        "---\nid: \"2.1\"\ntitle: \"After <both> & more\"\ndepends_on: [1.1, 1.2]\n---\nDo it.\n",
    );
    p.commit_all("backlog");
    p.agent(SLOW_AGENT);
    let run = Bg::start(&p, &["run", "--parallel", "-j", "2", "--serve"], &[]);
    let url = run.url();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    wait_until("both first stories to start", LIMIT, || {
        p.scratch.join("1.1-started").exists() && p.scratch.join("1.2-started").exists()
    });

    let mut b = Browser::open(&chrome, &url);
    wait_until("the page to show the running stories", LIMIT, || {
        let rows = b.rows();
        rows.len() == 3
            && rows.iter().filter(|(_, s)| s == "running").count() == 2
            && rows.iter().any(|(id, s)| id == "2.1" && s == "pending")
    });
    wait_until("the running table and the graph", LIMIT, || {
        b.eval("document.querySelectorAll('#running tbody tr').length") == json!(2)
            && b.eval("document.querySelectorAll('#graph a.node.s-running').length") == json!(2)
    });
    assert_eq!(
        b.eval("document.title"),
        json!("ralph · proj · live"),
        "the snapshot came in"
    );
    assert!(
        b.eval("document.getElementById('spend').textContent")
            .as_str()
            .unwrap()
            .contains("of $5.00"),
        "spend against the budget"
    );
    assert_eq!(
        b.eval("document.querySelector('#stories tr[data-id=\"2.1\"]').cells[1].textContent"),
        json!("After <both> & more"),
        "titles are text, not markup"
    );
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("ralph-serve");
    fs::create_dir_all(&shots).unwrap();
    wait_until("the agents' activity", LIMIT, || {
        b.eval("document.querySelector('#running tbody tr td.act').textContent")
            .as_str()
            .is_some_and(|t| t.starts_with("working on"))
    });
    b.screenshot(&shots.join("running.png"));
    b.eval("document.querySelector('#stories tr[data-id=\"1.1\"]').click()");
    wait_until("the story panel's log tail", LIMIT, || {
        b.eval("document.getElementById('log').textContent")
            .as_str()
            .is_some_and(|t| t.contains("working on 1.1"))
    });
    b.screenshot(&shots.join("panel.png"));

    // Only the event stream can tell the open page what happens now.
    fs::write(p.scratch.join("go"), "").unwrap();
    wait_until("every story done on the page", LIMIT, || {
        let rows = b.rows();
        rows.len() == 3 && rows.iter().all(|(_, s)| s == "done")
    });
    wait_until("the graph's nodes recoloured", LIMIT, || {
        b.eval("document.querySelectorAll('#graph a.node.s-done').length") == json!(3)
    });
    assert_eq!(b.eval("document.body.dataset.ready"), json!("1"));
    let seq = b.eval("document.body.dataset.seq");
    assert!(
        seq.as_str().and_then(|s| s.parse::<u64>().ok()).unwrap() > 3,
        "the page applied pushed changes: {seq}"
    );
    b.screenshot(&shots.join("done.png"));
    eprintln!("web view screenshots: {}", shots.display());
    assert_eq!(run.wait(), 0);
    // The run's server sent the page its end before it went (a server
    // cut off leaves the page reconnecting).
    wait_until("the page to say the run ended", LIMIT, || {
        b.eval("document.getElementById('conn').textContent") == json!("ended")
    });
    let line = b.eval("document.getElementById('runline').textContent");
    assert!(line.as_str().unwrap().contains("ended, exit 0"), "{line}");
    drop(b);
    assert_eq!(p.completed().len(), 3);
}

/// A stand-in for the run's control socket (the steering commands'
/// server): records the line it got, answers one line.
fn stub_socket(p: &Project, answer: &'static str) -> std::thread::JoinHandle<String> {
    let path = p.root.join(".ralph/run.sock");
    let _ = fs::remove_file(&path);
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    std::thread::spawn(move || {
        let (s, _) = listener.accept().unwrap();
        let mut line = String::new();
        BufReader::new(&s).read_line(&mut line).unwrap();
        (&s).write_all(answer.as_bytes()).unwrap();
        line
    })
}

#[test]
fn every_request_needs_the_token_on_any_address() {
    let p = Project::with_backlog("1.1 | One\n", FAST_CONFIG);
    p.commit_all("backlog");
    // Another loopback address stands for a LAN one: not 127.0.0.1.
    let srv = Bg::start(&p, &["serve", "127.0.0.2:0"], &[]);
    let url = srv.url();
    assert!(url.starts_with("http://127.0.0.2:"), "{url}");
    let (b, token) = (base(&url), token_of(&url));
    assert_eq!(token.len(), 32, "{url}");
    for path in [
        "/",
        "/api/state",
        "/api/stories",
        "/api/runs",
        "/api/events",
    ] {
        let (code, body) = http(&b, "GET", path, &[], "");
        assert_eq!(code, 401, "{path} without the token: {body}");
        assert!(body.contains("token"), "{body}");
        let (code, _) = http(
            &b,
            "GET",
            &format!("{path}?token=wrong{}", &token[5..]),
            &[],
            "",
        );
        assert_eq!(code, 401, "{path} with a wrong token");
    }
    let (code, body) = http(&b, "GET", &format!("/api/state?token={token}"), &[], "");
    assert_eq!(code, 200, "{body}");
    let state: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(state["stories"][0]["id"], json!("1.1"));
    assert_eq!(state["stories"][0]["status"], json!("pending"));
    let (code, _) = http(&b, "GET", "/api/stories", &[("X-Ralph-Token", &token)], "");
    assert_eq!(code, 200, "the header does as well");
    drop(srv);

    // On 127.0.0.1 as well (issue 31: an agent shares the loopback), reads
    // and controls alike.
    let srv = Bg::start(&p, &["serve"], &[]);
    let url = srv.url();
    let (b, token) = (base(&url), token_of(&url));
    for path in ["/", "/api/state", "/api/stories/1.1", "/api/dag.svg"] {
        assert_eq!(http(&b, "GET", path, &[], "").0, 401, "{path}");
    }
    assert_eq!(
        http(&b, "GET", &format!("/api/state?token={token}"), &[], "").0,
        200
    );
    let pause = r#"{"cmd":"pause"}"#;
    let (code, body) = http(&b, "POST", "/api/control", &[], pause);
    assert_eq!(code, 401, "a control without the token: {body}");
    let (code, body) = http(
        &b,
        "POST",
        &format!("/api/control?token={token}"),
        &[],
        r#"{"cmd":"explode"}"#,
    );
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("pause"), "the commands are listed: {body}");
}

#[test]
fn a_pause_pressed_through_the_api_reaches_the_run_and_shows_in_the_page() {
    // The run's control socket is the steering commands' (issue 24 part 1);
    // a stub in its place records what the API forwards.
    let p = Project::with_backlog("1.1 | One\n1.2 | Two\n", FAST_CONFIG);
    p.commit_all("backlog");
    let srv = Bg::start(&p, &["serve"], &[]);
    let url = srv.url();
    let (b, token) = (base(&url), token_of(&url));
    let chrome = chromium("the page");
    let mut page = chrome.as_ref().map(|c| Browser::open(c, &url));
    if let Some(page) = page.as_mut() {
        wait_until("the page", LIMIT, || page.rows().len() == 2);
    }
    let got = stub_socket(
        &p,
        "{\"ok\":true,\"message\":\"paused: no new attempt starts\"}\n",
    );
    let (code, body) = http(
        &b,
        "POST",
        "/api/control",
        &[
            ("X-Ralph-Token", &token),
            ("Content-Type", "application/json"),
        ],
        r#"{"cmd":"pause"}"#,
    );
    assert_eq!(code, 200, "{body}");
    let reply: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        reply,
        json!({ "ok": true, "message": "paused: no new attempt starts" })
    );
    assert_eq!(
        got.join().unwrap(),
        "{\"cmd\":\"pause\"}\n",
        "forwarded verbatim, one line"
    );
    if let Some(page) = page.as_mut() {
        wait_until("the reply on the page", LIMIT, || {
            page.eval("document.getElementById('reply').textContent")
                == json!("pause: paused: no new attempt starts")
        });
    }

    // A refusal comes back as it is, with its hint.
    let got = stub_socket(
        &p,
        "{\"ok\":false,\"message\":\"no story 9.9\",\"hint\":\"ralph stories lists them\"}\n",
    );
    let (code, body) = http(
        &b,
        "POST",
        &format!("/api/control?token={token}"),
        &[],
        r#"{"cmd":"hold","id":"9.9"}"#,
    );
    assert_eq!(code, 409, "{body}");
    assert!(body.contains("ralph stories lists them"), "{body}");
    assert_eq!(got.join().unwrap(), "{\"cmd\":\"hold\",\"id\":\"9.9\"}\n");

    // No run, no socket: said, with what to do.
    fs::remove_file(p.root.join(".ralph/run.sock")).unwrap();
    let (code, body) = http(
        &b,
        "POST",
        &format!("/api/control?token={token}"),
        &[],
        r#"{"cmd":"resume"}"#,
    );
    assert_eq!(code, 409, "{body}");
    assert!(body.contains("ralph run"), "{body}");
}

#[test]
fn secrets_are_not_in_what_the_api_serves() {
    const SECRET: &str = "sk-ant-api03-web-view-secret-0123456789";
    let p = Project::with_backlog("1.1 | One\n", FAST_CONFIG);
    p.commit_all("backlog");
    p.agent(
        r#"
echo "key is $ANTHROPIC_API_KEY"
commit_file "src/$ID.txt"
result "used $ANTHROPIC_API_KEY <ralph>FAIL 1.1: $ANTHROPIC_API_KEY rejected</ralph>"
"#,
    );
    let r = p.ralph_with(&["run"], &[("ANTHROPIC_API_KEY", SECRET)]);
    assert_eq!(r.code, 1, "{r:?}");
    let log = fs::read_to_string(p.root.join(".ralph/logs/1.1/attempt-1.log")).unwrap();
    assert!(log.contains(SECRET), "sandbox off: the log itself has it");

    let srv = Bg::start(&p, &["serve"], &[("ANTHROPIC_API_KEY", SECRET)]);
    let url = srv.url();
    let (b, token) = (base(&url), token_of(&url));
    let with_token = [("X-Ralph-Token", token.as_str())];
    // The first request, made as soon as the URL is out, already gets the
    // backlog and the finished run (they were read before it was printed).
    let (_, first) = http(&b, "GET", "/api/state", &with_token, "");
    let first: Value = serde_json::from_str(&first).unwrap();
    assert_eq!(first["stories"][0]["id"], json!("1.1"), "{first}");
    assert_eq!(first["summary"]["exit_code"], json!(1), "{first}");
    let (_, runs) = http(&b, "GET", "/api/runs", &with_token, "");
    let runs: Value = serde_json::from_str(&runs).unwrap();
    let run_id = runs[0]["id"].as_str().unwrap().to_string();
    let mut seen = String::new();
    for path in [
        "/api/state".to_string(),
        "/api/stories".to_string(),
        "/api/stories/1.1".to_string(),
        format!("/api/runs/{run_id}"),
        "/api/dag.svg".to_string(),
    ] {
        let (code, body) = http(&b, "GET", &path, &with_token, "");
        assert_eq!(code, 200, "{path}: {body}");
        assert!(!body.contains(SECRET), "{path} serves the secret: {body}");
        seen.push_str(&body);
    }
    assert!(seen.contains("key is ***"), "the log tail, masked: {seen}");
    // The followed log is masked too.
    let host = b.trim_start_matches("http://").to_string();
    let mut s = TcpStream::connect(&host).unwrap();
    write!(
        s,
        "GET /api/stories/1.1/log HTTP/1.1\r\nHost: {host}\r\nX-Ralph-Token: {token}\r\n\r\n"
    )
    .unwrap();
    let mut r = BufReader::new(s);
    let mut first = String::new();
    wait_until("the log stream's first event", LIMIT, || {
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        first.push_str(&line);
        first.contains("data:")
    });
    assert!(first.contains("key is ***"), "{first}");
    assert!(!first.contains(SECRET), "{first}");
}

#[test]
fn ralph_serve_follows_a_run_of_another_process_as_its_records_grow() {
    let p = Project::with_backlog("# [batch:1]\n1.1 | One\n1.2 | Two\n", FAST_CONFIG);
    p.commit_all("backlog");
    p.agent(SLOW_AGENT);
    let srv = Bg::start(&p, &["serve"], &[]);
    let url = srv.url();
    let (b, token) = (base(&url), token_of(&url));
    let state = || -> Value {
        serde_json::from_str(&http(&b, "GET", "/api/state", &[("X-Ralph-Token", &token)], "").1)
            .unwrap()
    };
    assert_eq!(state()["summary"]["live"], json!(false), "no run yet");
    assert_eq!(state()["controls"], json!(false));

    let run = Bg::start(&p, &["run", "--parallel", "-j", "2"], &[]);
    wait_until(
        "both stories running, as the served state says",
        LIMIT,
        || {
            let s = state();
            s["summary"]["live"] == json!(true)
                && s["summary"]["running"]
                    .as_array()
                    .is_some_and(|r| r.len() == 2)
                && s["stories"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|x| x["status"] == json!("running"))
        },
    );
    assert_eq!(state()["controls"], json!(true), "a run to steer");
    fs::write(p.scratch.join("go"), "").unwrap();
    assert_eq!(run.wait(), 0);
    wait_until("the end of the run, served", LIMIT, || {
        let s = state();
        s["summary"]["live"] == json!(false)
            && s["summary"]["exit_code"] == json!(0)
            && s["summary"]["landed"] == json!(2)
            && s["stories"]
                .as_array()
                .unwrap()
                .iter()
                .all(|x| x["status"] == json!("done"))
    });
    assert_eq!(state()["controls"], json!(false));
}

/// A browser that closes a followed log (the page's panel closed, a tab
/// gone) leaves the server serving: `ralph serve` is no filter that a
/// closed reader should end, and its writes after the close must fail
/// quietly.
#[test]
fn a_client_that_goes_away_does_not_take_the_server_with_it() {
    let p = Project::with_backlog("1.1 | One\n", FAST_CONFIG);
    p.commit_all("backlog");
    let log = p.root.join(".ralph/logs/1.1/attempt-1.log");
    p.write_outside(&log, "first line\n");
    let mut srv = Bg::start(&p, &["serve"], &[]);
    let url = srv.url();
    let (b, token) = (base(&url), token_of(&url));
    let host = b.trim_start_matches("http://").to_string();
    let follow = || {
        let mut s = TcpStream::connect(&host).unwrap();
        write!(
            s,
            "GET /api/stories/1.1/log HTTP/1.1\r\nHost: {host}\r\nX-Ralph-Token: {token}\r\n\r\n"
        )
        .unwrap();
        BufReader::new(s)
    };
    // Reads until `n` events of `kind` came, the log growing meanwhile.
    let events = |r: &mut BufReader<TcpStream>, kind: &str, n: usize| {
        let mut got = 0;
        let mut k = 0;
        wait_until("log events", LIMIT, || {
            k += 1;
            let mut f = fs::OpenOptions::new().append(true).open(&log).unwrap();
            writeln!(f, "line {k}").unwrap();
            let mut line = String::new();
            r.read_line(&mut line).unwrap();
            if line.trim() == format!("event: {kind}") {
                got += 1;
            }
            got >= n
        });
    };
    let mut gone = follow();
    events(&mut gone, "tail", 1);
    drop(gone);
    // The same file, followed by a second client: while it gets five
    // batches of lines, the first one's stream was written to as often.
    let mut other = follow();
    events(&mut other, "lines", 5);
    assert!(srv.child.try_wait().unwrap().is_none(), "the server died");
    assert_eq!(
        http(&b, "GET", "/api/state", &[("X-Ralph-Token", &token)], "").0,
        200
    );
}

/// The page's buttons reach a real run: a pause pressed through the API
/// holds the next story back until a resume pressed the same way.
#[test]
fn a_pause_pressed_on_a_live_runs_page_holds_the_next_start_until_resume() {
    let p = Project::with_backlog("1.1 | One\n1.2 | Two\n", FAST_CONFIG);
    p.commit_all("backlog");
    p.agent(
        r#"
touch "$SCRATCH/$ID-started"
while [ ! -e "$SCRATCH/go-$ID" ]; do sleep 0.02; done
commit_file "src/$ID.txt"
done_
"#,
    );
    let run = Bg::start(&p, &["run", "-j", "1", "--serve"], &[]);
    let url = run.url();
    let (b, token) = (base(&url), token_of(&url));
    wait_until("1.1 to start", LIMIT, || {
        p.scratch.join("1.1-started").exists()
    });
    let control = |body: &str| {
        let (code, reply) = http(
            &b,
            "POST",
            &format!("/api/control?token={token}"),
            &[("Content-Type", "application/json")],
            body,
        );
        (
            code,
            serde_json::from_str::<Value>(&reply).unwrap_or(json!(reply)),
        )
    };
    let (code, reply) = control(r#"{"cmd":"pause"}"#);
    assert_eq!(code, 200, "{reply}");
    assert!(
        reply["message"].as_str().unwrap().starts_with("paused"),
        "{reply}"
    );
    // The page's model shows it (issue 32: only usage-limit pauses did).
    let pauses = || -> Value {
        let (_, body) = http(&b, "GET", &format!("/api/state?token={token}"), &[], "");
        serde_json::from_str::<Value>(&body).unwrap()["summary"]["pauses"].clone()
    };
    wait_until("the pause in /api/state", LIMIT, || {
        pauses()
            .as_array()
            .is_some_and(|a| a.iter().any(|p| p["why"] == "pause"))
    });
    fs::write(p.scratch.join("go-1.1"), "").unwrap();
    wait_until("1.1 to land", LIMIT, || p.completed() == ["1.1"]);
    // Answered only after the run handled 1.1's landing: had the pause not
    // held, 1.2 would have started in that step.
    let (_, reply) = control(r#"{"cmd":"pause"}"#);
    assert_eq!(reply["message"], json!("already paused"), "{reply}");
    assert!(!p.scratch.join("1.2-started").exists());
    let (code, reply) = control(r#"{"cmd":"resume"}"#);
    assert_eq!(code, 200, "{reply}");
    wait_until("the pause gone from /api/state", LIMIT, || {
        pauses().as_array().is_some_and(|a| a.is_empty())
    });
    wait_until("1.2 to start", LIMIT, || {
        p.scratch.join("1.2-started").exists()
    });
    fs::write(p.scratch.join("go-1.2"), "").unwrap();
    assert_eq!(run.wait(), 0);
    assert_eq!(p.completed(), ["1.1", "1.2"]);
    let order: Vec<String> = run_records(&p)
        .iter()
        .filter_map(|r| match r["ev"].as_str() {
            Some("steer") => Some(format!("steer {}", r["cmd"].as_str().unwrap_or(""))),
            Some("attempt_start") => Some(format!("start {}", r["story"].as_str().unwrap_or(""))),
            _ => None,
        })
        .collect();
    assert_eq!(
        order,
        [
            "start 1.1",
            "steer pause",
            "steer pause",
            "steer resume",
            "start 1.2"
        ]
    );
}

/// Issue 34 item 5: the page shows the merge queue as it is — each story
/// of a chain with its position, the worktree its candidate validates in
/// and the stories that merge holds before it — and what waits. Each
/// validation waits for the test's `release-<story>` file, so the page is
/// read while candidates are validating.
#[test]
fn the_page_shows_a_chains_candidates_while_they_validate() {
    let Some(chrome) = chromium("the page") else {
        return;
    };
    let script = p_validation_script();
    let p = Project::with_backlog(
        "# [batch:1]\n1.1 | A\n1.2 | B\n1.3 | C\n",
        &format!(
            r#"{{ "loop": {{ "max_retries": 2, "grace_seconds": 1 }},
      "landing": {{ "speculate": 4, "max_validations": 4 }},
      "validation": {{ "commands": [ {{ "name": "tests", "cmd": {script}, "required": true }} ] }} }}"#
        ),
    );
    p.agent(
        r#"
commit_file "story/$ID.txt"
done_
"#,
    );
    p.commit_all("backlog");
    let run = Bg::start(&p, &["run", "--parallel", "-j", "3", "--serve"], &[]);
    let url = run.url();
    let mut b = Browser::open(&chrome, &url);
    let queue = |b: &mut Browser| -> String {
        b.eval("document.getElementById('landq').textContent")
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    let release = |id: &str| fs::write(p.scratch.join(format!("release-{id}")), "").unwrap();
    // However the three finish, a chain of two or three forms: 1.1 alone
    // first is let through until one does.
    let mut released = Vec::new();
    wait_until("a chain validating on the page", LIMIT, || {
        let q = queue(&mut b);
        if q.contains("chain position 2 of") && q.contains("before it") {
            return true;
        }
        if q.contains("landing now — validating in validate") {
            for id in ["1.1", "1.2", "1.3"] {
                if q.contains(&format!("{id} — landing now")) && !released.contains(&id) {
                    release(id);
                    released.push(id);
                }
            }
        }
        false
    });
    let q = queue(&mut b);
    assert!(q.contains("— validating in validate-2 with "), "{q}");
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("ralph-serve");
    fs::create_dir_all(&shots).unwrap();
    b.screenshot(&shots.join("chain.png"));
    for id in ["1.1", "1.2", "1.3"] {
        release(id);
    }
    assert_eq!(run.wait(), 0);
    assert_eq!(p.completed().len(), 3);
}

/// A validation command that waits (bounded) for `release-$RALPH_STORY`
/// in the scratch directory, as a JSON string.
fn p_validation_script() -> String {
    serde_json::to_string(
        r#"for _ in $(seq 1 2400); do [ -e "$SCRATCH/release-$RALPH_STORY" ] && exit 0; sleep 0.05; done; exit 1"#,
    )
    .unwrap()
}

/// Best of N (issue 36): a racing story is one story with a row per
/// candidate — its agent, model and state, its log a click away — kept
/// once the race is over with its winner marked; `ralph serve` folds the
/// same records into the same rows.
#[test]
fn the_page_shows_a_races_candidates_then_its_winner() {
    let Some(chrome) = chromium("the page") else {
        return;
    };
    let p = Project::with_backlog(
        "1.1 | Raced\n",
        r#"{ "loop": { "max_retries": 2, "grace_seconds": 1 },
          "attempts": { "best_of": 2, "candidates": ["claude:slow", "claude:fast"] } }"#,
    );
    p.commit_all("backlog");
    // `slow` works until it is stopped; `fast` finishes once told to.
    p.agent(&format!(
        "{MODEL_AS_M}{}",
        r#"
echo "candidate $RALPH_CANDIDATE on $M at work"
touch "$SCRATCH/started-$RALPH_CANDIDATE"
if [ "$M" = slow ]; then
  commit_file "src/slow.txt"
  while [ ! -e "$SCRATCH/never" ]; do sleep 0.05; done
fi
while [ ! -e "$SCRATCH/go-fast" ]; do sleep 0.05; done
commit_file "src/fast.txt"; done_
"#
    ));
    let run = Bg::start(&p, &["run", "-j", "2", "--serve"], &[]);
    let url = run.url();
    let mut b = Browser::open(&chrome, &url);
    let cands = |b: &mut Browser| -> Value {
        b.eval(
            "Array.from(document.querySelectorAll('#races tr.cand[data-story=\"1.1\"]'))\
             .map(r => [r.dataset.k, r.cells[1].textContent, r.cells[2].textContent, r.dataset.state])",
        )
    };
    wait_until(
        "the race's two candidates running on the page",
        LIMIT,
        || {
            cands(&mut b)
                == json!([
                    ["1", "claude", "slow", "running"],
                    ["2", "claude", "fast", "running"]
                ])
        },
    );
    let head = b.eval("document.querySelector('#races tr.race[data-id=\"1.1\"]').textContent");
    assert!(
        head.as_str().unwrap().contains("best of 2 — racing"),
        "{head}"
    );
    assert_eq!(
        b.eval("document.querySelector('#running tbody tr[data-id=\"1.1\"]').cells[2].textContent"),
        json!("best of 2"),
        "one running story, not two"
    );
    // A candidate's log, from its row.
    b.eval("document.querySelector('#races tr.cand[data-k=\"1\"] a.log').click()");
    wait_until("candidate 1's log in the panel", LIMIT, || {
        b.eval("document.getElementById('log').textContent")
            .as_str()
            .is_some_and(|t| t.contains("candidate 1 on slow at work"))
    });
    assert_eq!(
        b.eval("document.getElementById('p-log').textContent"),
        json!("attempt 1, candidate 1")
    );
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("ralph-serve");
    fs::create_dir_all(&shots).unwrap();
    b.screenshot(&shots.join("race.png"));

    // Only the event stream can tell the open page who won.
    fs::write(p.scratch.join("go-fast"), "").unwrap();
    wait_until("the winner on the page", LIMIT, || {
        cands(&mut b)
            == json!([
                ["1", "claude", "slow", "stopped"],
                ["2", "claude", "fast", "won"]
            ])
            && b.eval("document.querySelector('#races tr.race[data-id=\"1.1\"]').dataset.over")
                == json!("1")
    });
    let head = b.eval("document.querySelector('#races tr.race[data-id=\"1.1\"]').textContent");
    assert!(
        head.as_str().unwrap().contains("won by candidate 2"),
        "{head}"
    );
    wait_until("the landing queue empty", LIMIT, || {
        b.eval("document.getElementById('landq').textContent") == json!("empty")
    });
    b.screenshot(&shots.join("race-won.png"));
    assert_eq!(run.wait(), 0);
    drop(b);
    assert_eq!(p.completed(), ["1.1"]);

    // `ralph serve` reads the same records into the same rows.
    let srv = Bg::start(&p, &["serve"], &[]);
    let url = srv.url();
    let (base, token) = (base(&url), token_of(&url));
    let state: Value =
        serde_json::from_str(&http(&base, "GET", "/api/state", &[("X-Ralph-Token", &token)], "").1)
            .unwrap();
    let races = &state["summary"]["races"];
    assert_eq!(races.as_array().map(Vec::len), Some(1), "{state}");
    assert_eq!(races[0]["over"], json!(true));
    let served: Vec<(u64, String)> = races[0]["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["k"].as_u64().unwrap(),
                c["state"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(served, [(1, "stopped".into()), (2, "won".into())]);
}
