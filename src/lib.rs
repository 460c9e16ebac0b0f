//! ralph: runs an AI coding agent over a backlog of stories, in parallel
//! worktrees, landing verified merges on the target branch. See CLAUDE.md for
//! the architecture map.

#![warn(unreachable_pub)]

mod agent;
mod backlog;
pub mod cli;
mod config;
mod control;
mod dag;
mod decompose;
mod display;
mod error;
mod gitops;
mod learnings;
mod process;
mod project;
mod prompt;
mod report;
mod run;
mod schedule;

mod docs;
mod logview;
mod state;
mod store;
mod timefmt;
mod ui;
