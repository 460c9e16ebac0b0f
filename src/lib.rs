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
mod exec;
mod gitops;
mod layout;
mod learnings;
mod postmortem;
mod process;
mod project;
mod prompt;
mod report;
mod report_html;
mod run;
mod runlog;
mod schedule;
mod stats;

mod docs;
mod logview;
mod state;
mod store;
mod timefmt;
mod ui;
