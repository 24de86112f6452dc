//! The binary as people use it: commands, operations, the README and docs run
//! as written, `dev`.
//!
//! One test binary; each module below is one subject.

#[path = "../common/mod.rs"]
mod common;

mod cli;
mod dev;
mod keys;
mod layout;
mod local_keys;
mod migrations;
mod operations;
mod readme;
