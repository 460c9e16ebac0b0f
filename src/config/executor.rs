//! `executor.*`: where attempts run (issue 23).

use super::reader::Reader;

/// `executor.kind` and its settings.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Executor {
    /// Slot worktrees of this checkout, agents as children (the default).
    Local,
    /// Each attempt is a job on a Ray cluster.
    Ray(RaySettings),
}

/// `executor.ray.*` and `executor.relay`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RaySettings {
    /// The dashboard's HTTP address (`http://127.0.0.1:8265`).
    pub(crate) address: String,
    /// The environment variable holding the cluster's token (never its value).
    pub(crate) token_env: String,
    /// ralph's path on the nodes; empty: the binary is uploaded with the job.
    pub(crate) ralph_path: String,
    /// Custom resources each attempt's job asks for (`{"ralph_slot": 1}`).
    pub(crate) resources: Vec<(String, f64)>,
    /// The git remote work travels through.
    pub(crate) relay: String,
}

/// `executor.*`: the Ray settings are read (and checked) only for `ray`.
pub(super) fn executor(r: &mut Reader) -> Executor {
    let kind = r.string("executor.kind", false);
    let relay = r.string("executor.relay", false);
    let address = r.string("executor.ray.address", false);
    let token_env = r.string("executor.ray.token_env", false);
    let ralph_path = r.string("executor.ray.ralph_path", true);
    let mut resources = Vec::new();
    if let Some(v) = r.get("executor.ray.resources").cloned() {
        let parsed = v.as_object().and_then(|o| {
            o.iter()
                .map(|(k, v)| Some((k.clone(), v.as_f64().filter(|x| *x > 0.0)?)))
                .collect::<Option<Vec<_>>>()
        });
        match parsed {
            Some(list) => resources = list,
            None => r.problem(
                "executor.ray.resources",
                format!(
                    "executor.ray.resources must be an object of positive amounts such as \
                     {{\"ralph_slot\": 1}}, got {v}"
                ),
            ),
        }
    }
    match kind.as_str() {
        "local" => Executor::Local,
        "ray" => {
            if !(address.starts_with("http://") || address.starts_with("https://")) {
                r.problem(
                    "executor.ray.address",
                    format!(
                        "executor.ray.address must be the dashboard's URL such as \
                         \"http://127.0.0.1:8265\", got {address:?}"
                    ),
                );
            }
            Executor::Ray(RaySettings {
                address,
                token_env,
                ralph_path,
                resources,
                relay,
            })
        }
        other => {
            r.problem(
                "executor.kind",
                format!(
                    "executor.kind {other:?} is not one ralph has: \"local\" (attempts on this \
                     machine) or \"ray\" (each attempt a job on a Ray cluster)"
                ),
            );
            Executor::Local
        }
    }
}
