//! ralph: runs an AI coding agent over a backlog of stories, in parallel
//! worktrees, landing verified merges on the target branch. See CLAUDE.md for
//! the architecture map.

pub mod agent;
pub mod backlog;
pub mod cli;
pub mod config;
pub mod dag;
pub mod error;
pub mod gitops;
pub mod learnings;
pub mod process;
pub mod project;
pub mod prompt;
pub mod report;
pub mod run;
pub mod schedule;

pub mod state;
pub mod store;
pub mod timefmt;
