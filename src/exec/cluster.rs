//! The Jobs REST API of a Ray cluster (issue 23), as `exec/ray.rs` uses
//! it: the calls (version, packages, submit, info, logs, stop, delete, the
//! job list and the nodes), and the pure readings of their answers (this
//! project's jobs of an earlier run, a node offering a resource) and the
//! job spec ralph submits.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{json, Value};

use crate::config::RaySettings;
use crate::error::RalphError;

use super::http::{self, Endpoint};

/// The Jobs API version ralph speaks (`GET /api/version`).
const JOBS_API_VERSION: &str = "4";
/// The most the dashboard reads in one request (`DASHBOARD_CLIENT_MAX_SIZE`).
const UPLOAD_MAX: usize = 100 << 20;

/// The Jobs API of one cluster.
#[derive(Debug, Clone)]
pub(crate) struct Cluster {
    ep: Endpoint,
    /// The token's value: kept in memory only.
    token: Option<String>,
    pub(crate) address: String,
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
}

/// A job this project submitted before this run started.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Orphan {
    pub(crate) submission_id: String,
    pub(crate) attempt: u32,
}

impl Cluster {
    /// The cluster of `settings`; the token from the variable it names.
    pub(crate) fn new(settings: &RaySettings) -> Result<Cluster, RalphError> {
        let ep = http::parse_endpoint(&settings.address).map_err(|e| {
            RalphError::usage(format!("executor.ray.address: {e}"))
                .with_hint("set it to the dashboard's http:// address, e.g. http://127.0.0.1:8265")
        })?;
        let token = std::env::var(&settings.token_env)
            .ok()
            .filter(|t| !t.trim().is_empty());
        Ok(Cluster {
            ep,
            token,
            address: settings.address.clone(),
        })
    }

    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Result<(u16, Value), String> {
        let bytes = body.map(|b| serde_json::to_vec(b).unwrap_or_default());
        let r = http::request(
            &self.ep,
            method,
            path,
            bytes.as_deref(),
            "application/json",
            self.token.as_deref(),
        )
        .map_err(|e| format!("Ray at {}: {e}", self.address))?;
        let v = serde_json::from_slice(&r.body).unwrap_or(Value::String(r.text()));
        Ok((r.status, v))
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
            let r = http::request(
                &self.ep,
                "PUT",
                &path,
                Some(&zip),
                "application/zip",
                self.token.as_deref(),
            )
            .map_err(|e| format!("Ray at {}: {e}", self.address))?;
            if r.status != 200 {
                return Err(format!("uploading ralph: HTTP {}: {}", r.status, r.text()));
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
            200 => Ok(Some(JobInfo {
                status: v["status"].as_str().unwrap_or("").to_string(),
                message: v["message"].as_str().unwrap_or("").to_string(),
            })),
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
        let (status, v) = self.call("GET", "/nodes?view=summary", None)?;
        if status != 200 {
            return Err(format!("HTTP {status}: {v}"));
        }
        Ok(offers(&v["data"], resource))
    }

    /// This project's jobs the cluster still holds, by story.
    pub(crate) fn orphans(&self, tag: &str) -> Result<HashMap<String, Orphan>, String> {
        let (status, v) = self.call("GET", "/api/jobs/", None)?;
        if status != 200 {
            return Err(format!("HTTP {status}: {v}"));
        }
        Ok(orphans_of(&v, tag))
    }
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

/// Whether a node alive in a `/nodes?view=summary` answer's `data` has
/// `resource`: in the logical resources the answer prints per node (exact
/// names), else in the node's total resources, whose names the dashboard
/// camel-cases (`ralph_node_w2` is `ralphNodeW2` there).
pub(crate) fn offers(data: &Value, resource: &str) -> bool {
    let camel = camel_case(resource);
    data["summary"].as_array().into_iter().flatten().any(|n| {
        let raylet = &n["raylet"];
        if raylet["state"].as_str() != Some("ALIVE") {
            return false;
        }
        let id = raylet["nodeId"].as_str().unwrap_or("");
        if let Some(text) = data["nodeLogicalResources"][id].as_str() {
            return text.split_whitespace().any(|w| w == resource);
        }
        let total = &raylet["resourcesTotal"];
        total.get(resource).is_some() || total.get(&camel).is_some()
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
        assert!(offers(&data, "ralph_node_head"));
        assert!(!offers(&data, "ralph_node_w2"));
        assert!(offers(&data, "ralph_node_w3"));
        assert!(!offers(&data, "ralph_node_w4"));
        assert_eq!(split_node("w2/1"), ("w2", Some(1)));
        assert_eq!(split_node("w2"), ("w2", None));
        assert_eq!(node_resource("w2"), "ralph_node_w2");
    }

    #[test]
    fn a_submission_id_is_stable() {
        assert_eq!(
            submission_id("ralph-1a2b3c4d-", "1.2", 3),
            "ralph-1a2b3c4d-1.2-3"
        );
    }
}
