//! Exit codes and the user-facing problem type shared by every command.
//!
//! Library code returns `Problem`s (bad input the user must fix) or `anyhow`
//! errors (environment failures); `cli` maps them to the exit codes of SPEC 2.

use std::fmt;
use std::path::PathBuf;

pub(crate) const EXIT_OK: i32 = 0;
pub(crate) const EXIT_STORIES_FAILED: i32 = 1;
pub(crate) const EXIT_BAD_INPUT: i32 = 2;
pub(crate) const EXIT_LOCKED: i32 = 3;
/// ralph itself failed (state not writable, a git error, a bug): nothing is
/// lost; fix the cause and run again.
pub(crate) const EXIT_INTERNAL: i32 = 4;
pub(crate) const EXIT_INTERRUPTED: i32 = 130;

/// One thing wrong with the user's input, located as precisely as we can.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Problem {
    /// Path relative to the project root when inside it.
    pub(crate) file: PathBuf,
    /// 1-based line, when the problem has one.
    pub(crate) line: Option<usize>,
    pub(crate) message: String,
    /// The config key the problem is about, for callers that act on which
    /// setting is wrong (never on the message text).
    pub(crate) key: Option<String>,
}

impl Problem {
    pub(crate) fn new(
        file: impl Into<PathBuf>,
        line: Option<usize>,
        message: impl Into<String>,
    ) -> Self {
        Problem {
            file: file.into(),
            line,
            message: message.into(),
            key: None,
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}:{}: {}", self.file.display(), l, self.message),
            None => write!(f, "{}: {}", self.file.display(), self.message),
        }
    }
}

/// Errors that end a command with a specific exit code. A hint says what
/// to do and is rendered on its own line, apart from the message.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RalphError {
    /// Bad usage, config or backlog: nothing was changed (exit 2).
    #[error("{}", render_problems(.0))]
    BadInput(Vec<Problem>),
    /// Bad usage with a free-form message (exit 2).
    #[error("{message}")]
    Usage {
        message: String,
        hint: Option<String>,
    },
    /// Another run holds the lock (exit 3).
    #[error("{message}")]
    Locked {
        message: String,
        hint: Option<String>,
    },
}

impl RalphError {
    pub(crate) fn usage(message: impl Into<String>) -> RalphError {
        RalphError::Usage {
            message: message.into(),
            hint: None,
        }
    }

    /// Adds what the user should do.
    pub(crate) fn with_hint(self, h: impl Into<String>) -> RalphError {
        match self {
            RalphError::Usage { message, .. } => RalphError::Usage {
                message,
                hint: Some(h.into()),
            },
            RalphError::Locked { message, .. } => RalphError::Locked {
                message,
                hint: Some(h.into()),
            },
            other => other,
        }
    }

    pub(crate) fn hint(&self) -> Option<&str> {
        match self {
            RalphError::Usage { hint, .. } | RalphError::Locked { hint, .. } => hint.as_deref(),
            RalphError::BadInput(_) => None,
        }
    }

    pub(crate) fn exit_code(&self) -> i32 {
        match self {
            RalphError::BadInput(_) | RalphError::Usage { .. } => EXIT_BAD_INPUT,
            RalphError::Locked { .. } => EXIT_LOCKED,
        }
    }
}

pub(crate) fn render_problems(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}
