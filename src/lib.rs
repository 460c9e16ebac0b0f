//! ralph: runs an AI coding agent over a backlog of stories, in parallel
//! worktrees, landing verified merges on the target branch. See CLAUDE.md for
//! the architecture map.

#![warn(unreachable_pub)]

mod agent;
mod allocator;
#[cfg(test)]
mod arch_tests;
mod atomic;
mod backlog;
pub mod cli;
mod config;
mod control;
mod dag;
mod decompose;
mod display;
mod error;
mod exec;
mod executor;
mod forecast;
mod gates;
mod gitops;
mod judge;
mod ladder;
mod layout;
mod learnings;
mod mcp;
mod paths;
mod plan;
mod postmortem;
mod pricing;
mod process;
mod project;
mod prompt;
mod redact;
mod report;
mod report_html;
mod run;
mod runlog;
mod sandbox;
mod schedule;
mod serve;
mod spend;
mod stats;
mod status;
mod steer;
#[cfg(test)]
mod testenv;

mod docs;
mod logview;
mod state;
mod store;
mod timefmt;
mod ui;
mod webhook;
