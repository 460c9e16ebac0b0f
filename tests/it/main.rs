//! One integration-test binary: every test runs the built `ralph` on a real
//! git repository with a fake agent executable.

mod clis;
mod fakeapi;
mod harness;
#[path = "../../src/shared_fixtures.rs"]
mod shared_fixtures;

mod cli;
mod compat;
mod core;
mod crash;
mod display;
mod faults;
mod fixup;
mod gates;
mod insight;
mod landing;
mod malformed;
mod newcomer;
mod parallel;
mod ray;
mod realcli;
mod review;
mod sandbox;
mod scheduling;
mod signing;
mod split;
