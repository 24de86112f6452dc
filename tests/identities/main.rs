//! Identities and compliance over HTTP, and the sandbox and production
//! environments.
//!
//! One test binary; each module below is one subject.

#[path = "../common/mod.rs"]
mod common;

mod environments;
mod identities;
mod trail;
