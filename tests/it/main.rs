//! One integration-test binary: every test runs the built `ralph` on a real
//! git repository with a fake agent executable.

mod harness;

mod cli;
mod compat;
mod core;
mod crash;
mod display;
mod landing;
mod malformed;
mod parallel;
