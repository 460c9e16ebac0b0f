//! The agent CLIs ralph drives: the default command line of each, how it
//! takes the prompt, what must be removed from its environment, and which
//! decoder reads its output. Pure data.

use serde_json::Value;

use super::event::AgentEvent;

/// One agent CLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub(crate) enum Backend {
    /// Claude Code (`claude -p --output-format stream-json`).
    #[default]
    Claude,
    /// Codex (`codex exec --json`).
    Codex,
    /// Gemini CLI with a paid key.
    Gemini,
    /// Antigravity.
    Agy,
    Opencode,
    /// Cursor's `cursor-agent`.
    Cursor,
    Amp,
    /// Any command: plain text output, signal tags only.
    Custom,
}

impl Backend {
    pub(crate) const ALL: [Backend; 8] = [
        Backend::Claude,
        Backend::Codex,
        Backend::Gemini,
        Backend::Agy,
        Backend::Opencode,
        Backend::Cursor,
        Backend::Amp,
        Backend::Custom,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Backend::Claude => "claude",
            Backend::Codex => "codex",
            Backend::Gemini => "gemini",
            Backend::Agy => "agy",
            Backend::Opencode => "opencode",
            Backend::Cursor => "cursor",
            Backend::Amp => "amp",
            Backend::Custom => "custom",
        }
    }

    /// The backend called `name` (`agent.name`, `--agent`, frontmatter `agent:`).
    pub(crate) fn parse(name: &str) -> Option<Backend> {
        Backend::ALL.into_iter().find(|b| b.name() == name.trim())
    }

    /// The names, for messages.
    pub(crate) fn names() -> String {
        Backend::ALL.map(Backend::name).join(", ")
    }

    /// The executable when `agent.command` does not say.
    pub(crate) fn default_command(self) -> &'static str {
        match self {
            Backend::Claude => "claude",
            Backend::Codex => "codex",
            Backend::Gemini => "gemini",
            Backend::Agy => "agy",
            Backend::Opencode => "opencode",
            Backend::Cursor => "cursor-agent",
            Backend::Amp => "amp",
            Backend::Custom => "agent",
        }
    }

    /// The arguments when `agent.flags` does not say. Every CLI here takes
    /// the prompt on stdin (never argv: prompts are long and private).
    pub(crate) fn default_args(self) -> &'static [&'static str] {
        match self {
            Backend::Claude => &[
                "--print",
                "--dangerously-skip-permissions",
                "--output-format",
                "stream-json",
                "--verbose",
            ],
            Backend::Codex => &[
                "exec",
                "--json",
                "--dangerously-bypass-approvals-and-sandbox",
                "--skip-git-repo-check",
                "-",
            ],
            Backend::Gemini | Backend::Agy => &["--output-format", "stream-json", "--yolo"],
            Backend::Opencode => &["run", "--format", "json"],
            Backend::Cursor => &[
                "-p",
                "--output-format",
                "stream-json",
                "--stream-partial-output",
                "--trust",
                "--force",
            ],
            Backend::Amp => &["-x", "--stream-json", "--dangerously-allow-all"],
            Backend::Custom => &[],
        }
    }

    /// How this CLI is told its model: `None` when it has no choice of
    /// model on its command line (Amp picks by mode, Antigravity and a
    /// custom command by their own settings), so `validate` refuses one.
    pub(crate) fn model_flag(self) -> Option<&'static str> {
        match self {
            Backend::Claude | Backend::Cursor => Some("--model"),
            Backend::Codex | Backend::Gemini | Backend::Opencode => Some("-m"),
            Backend::Agy | Backend::Amp | Backend::Custom => None,
        }
    }

    /// Variables removed from the agent's environment: a nested Claude Code
    /// refuses to start when it sees it is inside another one, and the
    /// other CLIs inherit nothing useful from them either.
    pub(crate) fn env_remove(self) -> &'static [&'static str] {
        &["CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT"]
    }

    /// The variables this CLI needs (names or `PREFIX_*` globs): the only
    /// ones of ralph's environment it receives besides the sandbox's base
    /// list (`sandbox::allowed_env`). From each CLI's documentation and
    /// the workspace notes on the CLIs.
    pub(crate) fn env_names(self) -> &'static [&'static str] {
        match self {
            Backend::Claude => &[
                "ANTHROPIC_*",
                "CLAUDE_CODE_*",
                "CLAUDE_CONFIG_DIR",
                "IS_SANDBOX",
                "API_TIMEOUT_MS",
                "BASH_DEFAULT_TIMEOUT_MS",
                "BASH_MAX_TIMEOUT_MS",
                "CLAUDE_STREAM_FIRST_BYTE_TIMEOUT_MS",
                "DISABLE_AUTOUPDATER",
                "DISABLE_TELEMETRY",
                "DISABLE_ERROR_REPORTING",
            ],
            Backend::Codex => &["OPENAI_*", "CODEX_*"],
            Backend::Gemini => &["GEMINI_*", "GOOGLE_*"],
            Backend::Agy => &["GEMINI_*", "GOOGLE_*", "ANTIGRAVITY_*"],
            Backend::Opencode => &["OPENCODE_*", "ANTHROPIC_*", "OPENAI_*"],
            Backend::Cursor => &["CURSOR_*"],
            Backend::Amp => &["AMP_*"],
            Backend::Custom => &[],
        }
    }

    /// Where the CLI keeps its login, settings and sessions, relative to
    /// `$HOME`: shown read-write inside the sandbox so a subscription login
    /// keeps working.
    pub(crate) fn state_paths(self) -> &'static [&'static str] {
        match self {
            Backend::Claude => &[".claude", ".claude.json"],
            Backend::Codex => &[".codex"],
            Backend::Gemini => &[".gemini"],
            Backend::Agy => &[".gemini", ".antigravity"],
            Backend::Opencode => &[
                ".config/opencode",
                ".local/share/opencode",
                ".local/state/opencode",
            ],
            Backend::Cursor => &[".cursor", ".config/cursor"],
            Backend::Amp => &[".config/amp", ".local/share/amp"],
            Backend::Custom => &[],
        }
    }
}

/// The output decoder of a backend's JSON events.
#[derive(Debug)]
pub(crate) enum Decoder {
    Claude(super::claude::Decoder),
    Codex(super::codex::Decoder),
    Gemini(super::gemini::Decoder),
    Agy(super::agy::Decoder),
    Opencode(super::opencode::Decoder),
    Cursor(super::cursor::Decoder),
}

impl Decoder {
    /// Amp's `--stream-json` is Claude Code's format; `None` for a custom
    /// command (plain text).
    pub(crate) fn for_backend(b: Backend) -> Option<Decoder> {
        Some(match b {
            Backend::Custom => return None,
            Backend::Claude | Backend::Amp => Decoder::Claude(Default::default()),
            Backend::Codex => Decoder::Codex(Default::default()),
            Backend::Gemini => Decoder::Gemini(Default::default()),
            Backend::Agy => Decoder::Agy(Default::default()),
            Backend::Opencode => Decoder::Opencode(Default::default()),
            Backend::Cursor => Decoder::Cursor(Default::default()),
        })
    }

    /// A line that is not JSON (stderr, mostly): some CLIs say there what
    /// they never put in their stream (Gemini's quota retries).
    pub(crate) fn plain_line(&mut self, line: &str) -> Vec<AgentEvent> {
        match self {
            Decoder::Gemini(d) => d.plain_line(line),
            _ => Vec::new(),
        }
    }

    /// The end of the output: whatever a decoder still holds.
    pub(crate) fn finish(&mut self) -> Vec<AgentEvent> {
        match self {
            Decoder::Gemini(d) => d.finish(),
            Decoder::Agy(d) => d.finish(),
            Decoder::Cursor(d) => d.finish(),
            Decoder::Claude(_) | Decoder::Codex(_) | Decoder::Opencode(_) => Vec::new(),
        }
    }

    /// The events of one JSON object; `None` when it is no event of this
    /// CLI's stream (then it is ignored, and the output not yet a stream).
    pub(crate) fn event(&mut self, ev: &Value) -> Option<Vec<AgentEvent>> {
        Some(match self {
            Decoder::Claude(d) => return d.event(ev),
            Decoder::Codex(d) => d.event(ev),
            Decoder::Gemini(d) => d.event(ev),
            Decoder::Agy(d) => d.event(ev),
            Decoder::Opencode(d) => d.event(ev),
            Decoder::Cursor(d) => d.event(ev),
        })
    }
}
