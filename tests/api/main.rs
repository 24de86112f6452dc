//! The HTTP API: endpoints and errors, the OpenAPI document as clients' tools
//! take it, signed requests, the operator token.
//!
//! One test binary; each module below is one subject.

#[path = "../common/mod.rs"]
mod common;

mod api;
mod audit_checkpoints;
mod audit_log;
mod disputes;
mod generated_clients;
mod key_pepper;
mod openapi;
mod operator_changes;
mod operator_decisions;
mod operator_keys;
mod operator_token;
mod operators;
mod signed_requests;
