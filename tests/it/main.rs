//! One integration-test binary: every test runs the built `ralph` on a real
//! git repository with a fake agent executable.

mod clis;
mod fakeapi;
mod github_api;
mod harness;
mod jira_api;
mod linear_api;
#[path = "../../src/testenv.rs"]
mod testenv;

mod best_of;
mod cli;
mod compat;
mod core;
mod crash;
mod display;
mod faults;
mod fixup;
mod forecast;
mod gates;
mod github;
mod insight;
mod jira;
mod landing;
mod linear;
mod malformed;
mod mcp;
mod models;
mod newcomer;
mod parallel;
mod plan;
mod queue;
mod ray;
mod realcli;
mod record;
mod review;
mod sandbox;
mod scheduling;
mod seal_git;
mod seal_io;
mod serve;
mod signing;
mod split;
mod steer;
mod webhooks;
