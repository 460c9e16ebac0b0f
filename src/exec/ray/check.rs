//! `ralph validate` on the Ray executor: what would fail the night in its
//! first minute (issue 35), said before a run starts: the cluster answers
//! and takes the token, every resource a job asks for is offered by some
//! live node (else every job waits for ever), and the relay answers (else
//! every attempt's base push fails).

use std::time::Duration;

use serde_json::Value;

use crate::config::RaySettings;
use crate::error::{Problem, RalphError};

use super::{relay_url, Cluster};

/// How long the relay may take to list its refs.
const RELAY_TIMEOUT: Duration = Duration::from_secs(20);

/// The lines to print; the problems found, as validate's other problems.
pub(crate) fn validate(
    project: &crate::project::Project,
    settings: &RaySettings,
) -> Result<Vec<String>, RalphError> {
    let cluster = Cluster::new(settings)?;
    let version = cluster.check()?;
    let git =
        crate::gitops::Git::open(&project.root).map_err(|e| RalphError::usage(e.to_string()))?;
    let relay = relay_url(&git, settings)?;
    let mut problems = Vec::new();
    match cluster.nodes() {
        Ok(nodes) => problems.extend(
            missing_resources(&nodes, &settings.resources)
                .into_iter()
                .map(|m| problem("executor.ray.resources", m)),
        ),
        Err(e) => problems.push(problem(
            "executor.ray.address",
            format!("executor.ray.address: cannot read the cluster's nodes: {e}"),
        )),
    }
    if let Err(e) = relay_answers(&relay) {
        problems.push(problem(
            "executor.relay",
            format!(
                "executor.relay {:?} ({relay}) does not answer: {e}; every attempt's work \
                 travels through it: start it, or set executor.relay to a remote every node \
                 can fetch from and push to",
                settings.relay
            ),
        ));
    }
    if !problems.is_empty() {
        return Err(RalphError::BadInput(problems));
    }
    Ok(vec![format!(
        "ok: Ray {version} at {} answers{}; relay {relay}",
        settings.address,
        if std::env::var(&settings.token_env).is_ok_and(|t| !t.is_empty()) {
            format!(" with the token in ${}", settings.token_env)
        } else {
            " without a token".to_string()
        }
    )])
}

fn problem(key: &str, message: String) -> Problem {
    let mut p = Problem::new(crate::config::CONFIG_FILE, None, message);
    p.key = Some(key.to_string());
    p
}

/// What `resources` asks that no live node of `nodes` (the answer's
/// `data` of `/nodes?view=summary`) has in that amount: a job asking it
/// would wait for ever. One message each.
pub(crate) fn missing_resources(nodes: &Value, resources: &[(String, f64)]) -> Vec<String> {
    resources
        .iter()
        .filter(|(name, amount)| !super::super::cluster::offers(nodes, name, *amount))
        .map(|(name, amount)| {
            format!(
                "executor.ray.resources: no live node of the cluster offers {amount} of \
                 {name:?}, so every job would wait for ever; start the nodes with it (`ray \
                 start --resources='{{\"{name}\": {amount}}}'`) or ask for less"
            )
        })
        .collect()
}

/// Whether the relay answers git (a ref listing that matches nothing).
fn relay_answers(url: &str) -> Result<(), String> {
    let args = ["ls-remote", "--quiet", url, "refs/ralph-validate/none"].map(String::from);
    let out = crate::process::run_captured("git", &args, b"", RELAY_TIMEOUT)
        .map_err(|e| format!("git could not start: {e}"))?;
    if out.timed_out {
        return Err(format!("no answer within {} s", RELAY_TIMEOUT.as_secs()));
    }
    if out.code != Some(0) {
        let last = out.stderr.trim().lines().last().unwrap_or("").to_string();
        return Err(format!("`git ls-remote` failed: {last}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_resource_no_live_node_offers_is_a_problem() {
        let nodes = json!({ "summary": [
            { "raylet": { "state": "ALIVE", "nodeId": "a" } },
            { "raylet": { "state": "DEAD", "nodeId": "b" } },
        ], "nodeLogicalResources": {
            "a": "0.0/2.0 ralph_slot\n0.0/2.0 CPU",
            "b": "0.0/1.0 gpu" } });
        let want = |list: &[(&str, f64)]| -> Vec<(String, f64)> {
            list.iter().map(|(k, v)| (k.to_string(), *v)).collect()
        };
        assert!(missing_resources(&nodes, &want(&[("ralph_slot", 1.0), ("CPU", 2.0)])).is_empty());
        let missing = missing_resources(&nodes, &want(&[("ralph_slot", 3.0), ("gpu", 1.0)]));
        assert_eq!(missing.len(), 2, "{missing:?}");
        assert!(missing[0].contains("3 of \"ralph_slot\""), "{missing:?}");
        assert!(missing[1].contains("\"gpu\""), "{missing:?}");
    }

    #[test]
    fn a_relay_nothing_answers_on_is_said() {
        let dir = tempfile::tempdir().unwrap();
        let bare = dir.path().join("r.git");
        std::fs::create_dir_all(&bare).unwrap();
        let init = crate::process::run_captured(
            "git",
            &[
                "init".to_string(),
                "-q".into(),
                "--bare".into(),
                bare.display().to_string(),
            ],
            b"",
            RELAY_TIMEOUT,
        )
        .unwrap();
        assert_eq!(init.code, Some(0));
        assert_eq!(relay_answers(&bare.display().to_string()), Ok(()));
        // Port 9 (discard) on loopback: nothing listens there.
        let err = relay_answers("git://127.0.0.1:9/none.git").unwrap_err();
        assert!(err.contains("failed"), "{err}");
    }
}
