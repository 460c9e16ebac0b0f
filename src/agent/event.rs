//! What agent output means, whatever CLI printed it: the events every
//! backend's decoder produces and `OutputParser::absorb` takes in, and the
//! token usage they carry. `absorb` hands on what is shown: an `Aside` as
//! `Text`, never `Thinking`, `ApiError` or `AuthRejected`.

/// Token usage of one attempt (summed over results).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Usage {
    pub(crate) input_tokens: u64,
    pub(crate) output_tokens: u64,
    pub(crate) cache_creation_input_tokens: u64,
    pub(crate) cache_read_input_tokens: u64,
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, o: Usage) {
        self.input_tokens += o.input_tokens;
        self.output_tokens += o.output_tokens;
        self.cache_creation_input_tokens += o.cache_creation_input_tokens;
        self.cache_read_input_tokens += o.cache_read_input_tokens;
    }
}

/// The file a tool call writes, when the tool is one that edits or writes
/// a file (Claude Code's `Edit`, `Write`, `MultiEdit`, `NotebookEdit`;
/// Gemini CLI's `write_file`, `replace`; opencode's and Cursor's `edit`,
/// `write`) and its summary is that file's path, relative to the worktree
/// (`./` and a leading `/` dropped). `None` for every other call, and for a
/// summary cut short. For conflict-aware dispatch: what a running agent is
/// changing, before git sees it.
pub(crate) fn edited_path(name: &str, summary: &str) -> Option<String> {
    const EDITS: [&str; 12] = [
        "edit",
        "write",
        "multiedit",
        "notebookedit",
        "write_file",
        "writefile",
        "replace",
        "edit_file",
        "editfile",
        "create_file",
        "createfile",
        "str_replace",
    ];
    let name = name.trim().to_ascii_lowercase();
    if !EDITS.contains(&name.as_str()) {
        return None;
    }
    let p = summary.trim();
    // A path inside the worktree was made relative (`./…`) with the
    // summary; one still absolute lies outside it.
    let p = p.strip_prefix("./").unwrap_or(p);
    let plain = !p.is_empty()
        && !p.starts_with('/')
        && !p.ends_with('\u{2026}')
        && !p.contains(char::is_whitespace)
        && !p.starts_with("..")
        && !p.contains("://")
        && !p.starts_with('{');
    plain.then(|| p.to_string())
}

/// What one line of agent output meant.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum AgentEvent {
    /// Assistant text (or a text-format line).
    Text(String),
    /// The agent called a tool; `summary` is a short one-line description.
    ToolUse { name: String, summary: String },
    /// The final result.
    Result {
        is_error: bool,
        text: String,
        usage: Usage,
        cost_usd: Option<f64>,
        num_turns: Option<u64>,
        api_error_status: Option<u64>,
    },
    /// A usage/rate limit was hit; `resets_at` in epoch seconds when known.
    RateLimited {
        resets_at: Option<u64>,
        message: String,
    },
    /// Text that is not the agent's own answer (a sub-agent's words,
    /// reported back to the main agent): shown, never scanned for tags or
    /// kept as the agent's text.
    Aside(String),
    /// The model answered with something neither text nor a tool call (a
    /// thinking block): nothing to show, but the CLI no longer waits on the
    /// API.
    Thinking,
    /// The CLI is retrying an API error itself; `status` is the HTTP status
    /// when the CLI gives it as a field (else it is read from `error`).
    ApiRetry {
        attempt: u64,
        error: String,
        status: Option<u64>,
    },
    /// The kind of API failure the CLI's own error message names (Claude
    /// Code's `"error"` on an assistant line it makes up: `server_error`,
    /// `overloaded`, `unknown`, …).
    ApiError(String),
    /// The API rejected the agent's credentials: nothing changes until a
    /// person fixes them.
    AuthRejected,
    /// The agent's session (thread) ID, for resuming it later.
    SessionId(String),
    /// Tokens (and cost, when the CLI says) to add to the attempt's totals,
    /// from CLIs that report usage per step rather than in one result.
    Usage { usage: Usage, cost_usd: Option<f64> },
    /// The limit is near but not reached (Claude's `allowed_warning`,
    /// Codex's `used_percent`).
    LimitWarning {
        resets_at: Option<u64>,
        used_percent: Option<f64>,
    },
}

#[cfg(test)]
mod tests {
    use super::edited_path;

    #[test]
    fn edits_name_their_file_other_calls_do_not() {
        assert_eq!(
            edited_path("Edit", "./src/lib.rs").as_deref(),
            Some("src/lib.rs")
        );
        assert_eq!(
            edited_path("Write", "shared-3.txt").as_deref(),
            Some("shared-3.txt")
        );
        assert_eq!(
            edited_path("write_file", "./docs/a.md").as_deref(),
            Some("docs/a.md")
        );
        assert_eq!(edited_path("Write", "/etc/hosts"), None);
        assert_eq!(edited_path("Bash", "echo hi > x.txt"), None);
        assert_eq!(edited_path("Read", "src/lib.rs"), None);
        assert_eq!(edited_path("Edit", "src/very/long/pa\u{2026}"), None);
        assert_eq!(edited_path("Edit", "../outside.rs"), None);
        assert_eq!(edited_path("Edit", ""), None);
        assert_eq!(edited_path("Write", "{\"content\":1}"), None);
    }
}
