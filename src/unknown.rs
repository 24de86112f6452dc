//! The error of a name outside a closed set (an account type, an identity
//! status): which set, the value given and what the set takes.

#[derive(Debug, thiserror::Error)]
#[error("unknown {what} {value:?} (expected {expected})")]
pub struct UnknownValue {
    what: &'static str,
    value: String,
    expected: &'static str,
}

impl UnknownValue {
    pub(crate) fn new(what: &'static str, value: &str, expected: &'static str) -> Self {
        Self { what, value: value.into(), expected }
    }
}
