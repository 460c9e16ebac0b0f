//! `backlog.*`: where the stories are kept (issue 27): files, GitHub
//! Issues or Linear (issue 37), and each tracker's settings.

use super::reader::Reader;

/// `backlog.*`: where the stories are kept (issue 27).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BacklogSource {
    /// `.ralph/stories.txt` with spec files, or `prd.json` (the default).
    Files,
    /// GitHub Issues (`backlog.source: "github"`).
    GitHub(GitHubSettings),
    /// Linear issues (`backlog.source: "linear"`, issue 37).
    Linear(LinearSettings),
    /// Jira issues (`backlog.source: "jira"`, issue 37).
    Jira(JiraSettings),
}

/// `backlog.jira.*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JiraSettings {
    /// The site's root, without a trailing `/`.
    pub(crate) url: String,
    /// The project's key (`SHOP`).
    pub(crate) project: String,
    /// The label that makes an issue a story (default `ralph`).
    pub(crate) label: String,
    /// More JQL, ANDed to the project and label (empty: none).
    pub(crate) jql: String,
    /// The transition a landed story's issue takes, by name.
    pub(crate) done_transition: String,
    /// Least seconds between two polls of the tracker during a run.
    pub(crate) poll_secs: u64,
    /// The REST API's version: 3 (Jira Cloud, ADF) or 2 (Data Center,
    /// which has no v3; plain-text comments).
    pub(crate) api_version: u64,
}

/// `backlog.linear.*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LinearSettings {
    /// The team's key (`ENG`).
    pub(crate) team: String,
    /// The label that makes an issue a story (default `ralph`), by name
    /// within the team.
    pub(crate) label: String,
    /// The GraphQL endpoint.
    pub(crate) api_url: String,
    /// Least seconds between two polls of the tracker during a run.
    pub(crate) poll_secs: u64,
}

/// `backlog.github.*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GitHubSettings {
    /// `owner/name`.
    pub(crate) repo: String,
    /// The label that makes an issue a story (default `ralph`).
    pub(crate) label: String,
    /// The REST API's root, without a trailing `/` (GitHub Enterprise, tests).
    pub(crate) api_url: String,
    /// Least seconds between two polls of the tracker during a run.
    pub(crate) poll_secs: u64,
}

impl BacklogSource {
    /// Least time between two reads of a tracker during a run.
    pub(crate) fn poll_every(&self) -> std::time::Duration {
        match self {
            BacklogSource::GitHub(g) => std::time::Duration::from_secs(g.poll_secs),
            BacklogSource::Linear(l) => std::time::Duration::from_secs(l.poll_secs),
            BacklogSource::Jira(j) => std::time::Duration::from_secs(j.poll_secs),
            BacklogSource::Files => std::time::Duration::MAX,
        }
    }
}

pub(super) fn backlog(r: &mut Reader) -> BacklogSource {
    let source = r.string("backlog.source", false);
    // Every key is read whatever the source, so a wrong value is named
    // even before the source is switched to it.
    let repo = r.string("backlog.github.repo", true);
    let label = r.string("backlog.github.label", false);
    let api_url = r
        .string("backlog.github.api_url", false)
        .trim_end_matches('/')
        .to_string();
    let poll_secs = r.uint(
        "backlog.github.poll_seconds",
        0,
        "a whole number of seconds",
    );
    let linear = linear_settings(r);
    let jira = jira_settings(r);
    match source.as_str() {
        "files" => BacklogSource::Files,
        "jira" => {
            let project = &jira.project;
            if !is_key(project) {
                r.problem(
                    "backlog.jira.project",
                    format!(
                        "backlog.jira.project must be the project's key (as `SHOP` in SHOP-7) \
                         with backlog.source \"jira\", got {project:?}"
                    ),
                );
            }
            if !(jira.url.starts_with("https://") || jira.url.starts_with("http://")) {
                r.problem(
                    "backlog.jira.url",
                    format!(
                        "backlog.jira.url must be the Jira site's http(s) URL (as \
                         `https://example.atlassian.net`) with backlog.source \"jira\", got {:?}",
                        jira.url
                    ),
                );
            }
            if !matches!(jira.api_version, 2 | 3) {
                r.problem(
                    "backlog.jira.api_version",
                    format!(
                        "backlog.jira.api_version must be 3 (Jira Cloud) or 2 (Jira Data Center), got {}",
                        jira.api_version
                    ),
                );
            }
            if jira.done_transition.trim().is_empty() {
                r.problem(
                    "backlog.jira.done_transition",
                    "backlog.jira.done_transition must name a transition (as `Done`)".to_string(),
                );
            }
            BacklogSource::Jira(jira)
        }
        "linear" => {
            let team = &linear.team;
            if !is_key(team) {
                r.problem(
                    "backlog.linear.team",
                    format!(
                        "backlog.linear.team must be the team's key (as `ENG` in ENG-12) with \
                         backlog.source \"linear\", got {team:?}"
                    ),
                );
            }
            if !(linear.api_url.starts_with("https://") || linear.api_url.starts_with("http://")) {
                r.problem(
                    "backlog.linear.api_url",
                    format!(
                        "backlog.linear.api_url must be an http(s) URL, got {:?}",
                        linear.api_url
                    ),
                );
            }
            BacklogSource::Linear(linear)
        }
        "github" => {
            let parts: Vec<&str> = repo.split('/').collect();
            let well_formed = parts.len() == 2
                && parts.iter().all(|p| {
                    !p.is_empty()
                        && p.chars()
                            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
                });
            if !well_formed {
                r.problem(
                    "backlog.github.repo",
                    format!(
                        "backlog.github.repo must be \"owner/name\" with backlog.source \"github\", \
                         got {repo:?}"
                    ),
                );
            }
            if !(api_url.starts_with("https://") || api_url.starts_with("http://")) {
                r.problem(
                    "backlog.github.api_url",
                    format!("backlog.github.api_url must be an http(s) URL, got {api_url:?}"),
                );
            }
            BacklogSource::GitHub(GitHubSettings {
                repo,
                label,
                api_url,
                poll_secs,
            })
        }
        other => {
            r.problem(
                "backlog.source",
                format!(
                    "backlog.source {other:?} is not one ralph has: \"files\" (stories.txt \
                     and specs, or prd.json), \"github\" (GitHub Issues), \"linear\" (Linear) \
                     or \"jira\" (Jira)"
                ),
            );
            BacklogSource::Files
        }
    }
}

/// `backlog.linear.*`, read whatever the source.
fn linear_settings(r: &mut Reader) -> LinearSettings {
    LinearSettings {
        team: r.string("backlog.linear.team", true).trim().to_string(),
        label: r.string("backlog.linear.label", false),
        api_url: r
            .string("backlog.linear.api_url", false)
            .trim_end_matches('/')
            .to_string(),
        poll_secs: r.uint(
            "backlog.linear.poll_seconds",
            0,
            "a whole number of seconds",
        ),
    }
}

/// A team's or project's key: `ENG`, `SHOP`.
fn is_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
}

/// `backlog.jira.*`, read whatever the source.
fn jira_settings(r: &mut Reader) -> JiraSettings {
    JiraSettings {
        url: r
            .string("backlog.jira.url", true)
            .trim()
            .trim_end_matches('/')
            .to_string(),
        project: r.string("backlog.jira.project", true).trim().to_string(),
        label: r.string("backlog.jira.label", false),
        jql: r.string("backlog.jira.jql", true).trim().to_string(),
        api_version: r.uint("backlog.jira.api_version", 2, "2 or 3"),
        done_transition: r
            .string("backlog.jira.done_transition", false)
            .trim()
            .to_string(),
        poll_secs: r.uint("backlog.jira.poll_seconds", 0, "a whole number of seconds"),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::json;

    use super::super::build;
    use super::*;

    #[test]
    fn jira_settings_are_read_with_their_defaults_and_their_problems_named() {
        let config = build(
            json!({"backlog": {"source": "jira",
                "jira": {"url": "https://x.atlassian.net/", "project": "SHOP"}}}),
            Path::new("config.json"),
            None,
        )
        .unwrap();
        assert_eq!(
            config.backlog,
            BacklogSource::Jira(JiraSettings {
                url: "https://x.atlassian.net".into(),
                project: "SHOP".into(),
                label: "ralph".into(),
                jql: String::new(),
                done_transition: "Done".into(),
                poll_secs: 60,
                api_version: 3,
            })
        );
        let problems = build(
            json!({"backlog": {"source": "jira",
                "jira": {"url": "x.atlassian.net", "api_version": 4, "done_transition": " "}}}),
            Path::new("config.json"),
            None,
        )
        .unwrap_err();
        let all = format!("{problems:?}");
        for key in [
            "backlog.jira.url must be",
            "backlog.jira.project must be",
            "backlog.jira.api_version must be 3",
            "backlog.jira.done_transition must name",
        ] {
            assert!(all.contains(key), "{key}: {all}");
        }
    }
}
