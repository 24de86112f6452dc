//! The people wing's rows: console users, enrol links, sessions and
//! sign-in failures.

pub mod console;
pub mod console_sessions;
