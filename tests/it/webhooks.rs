//! Webhooks (issue 37 item 5, `notify.webhooks`): a receiver on 127.0.0.1
//! gets one post per landed story and one at the run's end, in its format;
//! a dead URL and a receiver that never answers hold up neither the run nor
//! the others; a secret in a URL is in no log. (The retries after a 502
//! are `webhook.rs`'s unit test.)

use std::fs;
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use crate::fakeapi::{FakeApi, Reply};
use crate::harness::*;

/// A receiver that keeps every body it got.
fn receiver() -> (FakeApi, Arc<Mutex<Vec<Value>>>) {
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    let api = FakeApi::start(move |req| {
        g.lock().unwrap().push(req.body.clone());
        Reply::json(200, json!({"ok": true}))
    });
    (api, got)
}

#[test]
fn each_landing_and_the_runs_end_are_posted_and_a_dead_receiver_holds_nothing_up() {
    let (json_hook, json_got) = receiver();
    let (slack_hook, slack_got) = receiver();
    // Takes connections and never answers.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_url = format!("http://{}/hook", silent.local_addr().unwrap());
    // Nothing listens there any more.
    let dead_url = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/hook", l.local_addr().unwrap())
    };
    let secret = "T0SECRETB0SECRETxyz";
    let config = json!({
        "loop": { "max_retries": 1 },
        "notify": { "webhooks": [
            { "url": dead_url, "events": ["story_landed", "run_end"] },
            { "url": silent_url },
            { "url": format!("{}/services/{secret}", json_hook.url()),
              "events": ["story_landed", "run_end", "story_failed"], "format": "json" },
            { "url": format!("{}/services/{secret}", slack_hook.url()),
              "events": ["run_end"], "format": "slack" },
        ] }
    });
    let p = Project::with_backlog("1.1 | One\n1.2 | Two\n1.3 | Three\n", &config.to_string());
    p.commit_all("backlog");
    p.agent(
        r#"
if [ "$ID" = 1.3 ]; then result "<ralph>FAIL 1.3: cannot</ralph>"; exit 0; fi
commit_file "src/$ID.txt"
done_
"#,
    );
    let r = p.ralph(&["run", "--parallel", "-j", "2"]);
    assert_eq!(r.code, 1, "1.3 failed for good: {r:?}");

    let got = json_got.lock().unwrap().clone();
    let of = |ev: &str| -> Vec<&Value> { got.iter().filter(|v| v["event"] == ev).collect() };
    let landed: Vec<&str> = of("story_landed")
        .iter()
        .filter_map(|v| v["story"].as_str())
        .collect();
    assert_eq!(landed.len(), 2, "one post per landing: {got:?}");
    assert!(
        landed.contains(&"1.1") && landed.contains(&"1.2"),
        "{got:?}"
    );
    let failed = of("story_failed");
    assert_eq!(failed.len(), 1, "once, not per attempt: {got:?}");
    assert_eq!(failed[0]["story"], "1.3");
    let end = of("run_end");
    assert_eq!(end.len(), 1, "{got:?}");
    assert_eq!(end[0]["exit_code"], 1);
    let runs: Vec<String> = fs::read_dir(p.root.join(".ralph/runs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let run_id = end[0]["run_id"].as_str().unwrap();
    assert!(
        runs.iter().any(|f| f.starts_with(run_id)),
        "run_id names the records file: {run_id} in {runs:?}"
    );
    assert!(got.iter().all(|v| v["run_id"] == run_id));

    let slack = slack_got.lock().unwrap().clone();
    assert_eq!(slack.len(), 1, "only run_end was asked for: {slack:?}");
    let text = slack[0]["text"].as_str().unwrap();
    assert!(
        text.contains("ended (exit 1): 2/3 done, 1 failed"),
        "{text}"
    );

    // The URL's secret is in no file ralph wrote but the config itself.
    let mut files = Vec::new();
    walk(&p.root.join(".ralph"), &mut files);
    for f in files {
        if f.ends_with("config.json") {
            continue;
        }
        let text = fs::read(&f).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&text).contains(secret),
            "{} holds the webhook's secret",
            f.display()
        );
    }
    assert!(!r.all().contains(secret), "{r:?}");
    drop(silent);
}

fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for e in fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = e.path();
        if path.is_dir() {
            walk(&path, out);
        } else {
            out.push(path);
        }
    }
}

#[test]
fn validate_names_a_webhook_that_is_no_url_without_repeating_it() {
    let config = json!({
        "notify": { "webhooks": [ { "url": "hooks.example/T0/SECRET42", "format": "slack" } ] }
    });
    let p = Project::with_backlog("1.1 | One\n", &config.to_string());
    p.commit_all("backlog");
    let r = p.ralph(&["validate"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.all()
            .contains("notify.webhooks[0].url must be an http:// or https:// URL"),
        "{r:?}"
    );
    assert!(!r.all().contains("SECRET42"), "{r:?}");
}
