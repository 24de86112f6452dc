//! Where the service runs. In `sandbox` the platform's counterparties are
//! simulated (the sandbox compliance provider decides, its magic values
//! apply); in `production` nothing is: compliance decisions come from
//! operators (or a real provider) alone. A store keeps the environment
//! `run` or `serve` first started it in, so that identities the sandbox
//! approved never reach production.

use std::{fmt, str::FromStr};

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Environment {
    Sandbox,
    Production,
}

/// The variable that sets the environment of `run` and `serve`.
pub const ENVIRONMENT_ENV: &str = "CUSTODY_INDEXER_ENVIRONMENT";

impl Environment {
    pub fn as_str(self) -> &'static str {
        match self {
            Environment::Sandbox => "sandbox",
            Environment::Production => "production",
        }
    }
}

impl fmt::Display for Environment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Environment {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "sandbox" => Ok(Environment::Sandbox),
            "production" => Ok(Environment::Production),
            other => Err(format!("unknown environment {other:?}: sandbox or production")),
        }
    }
}

/// Why `run` or `serve` refuses a store.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvironmentError {
    #[error(
        "the store was first started in {stored}, and this process runs in {requested}: a store keeps one \
         environment (identities the sandbox approved must never reach production); start with \
         --environment {stored} ({ENVIRONMENT_ENV}={stored}) or use another store"
    )]
    Mismatch { stored: Environment, requested: Environment },
    #[error(
        "the store has no environment yet, and its audit trail holds decisions of the sandbox compliance \
         provider: start it once with an explicit --environment ({ENVIRONMENT_ENV}): sandbox to go on trying \
         it out, production only if the identities it approved may be taken into production"
    )]
    SandboxDecisions,
}

/// The environment a process runs in, from the store's stamp (`stored`),
/// the one asked for (`requested`, `None` when left to the default,
/// `production`) and whether an unstamped store's audit trail holds sandbox
/// decisions. An unstamped store takes the environment it is started in.
pub fn on_start(
    stored: Option<Environment>,
    requested: Option<Environment>,
    sandbox_decisions: bool,
) -> Result<Environment, EnvironmentError> {
    let chosen = requested.unwrap_or(Environment::Production);
    match stored {
        Some(stored) if stored != chosen => Err(EnvironmentError::Mismatch { stored, requested: chosen }),
        Some(stored) => Ok(stored),
        None if requested.is_none() && sandbox_decisions => Err(EnvironmentError::SandboxDecisions),
        None => Ok(chosen),
    }
}

#[cfg(test)]
mod tests {
    use super::{Environment::*, EnvironmentError::*, *};

    #[test]
    fn a_store_keeps_the_environment_it_was_first_started_in() {
        let cases = [
            // (stored, requested, sandbox decisions) → outcome
            (None, None, false, Ok(Production)),
            (None, Some(Sandbox), false, Ok(Sandbox)),
            (None, Some(Production), false, Ok(Production)),
            (None, None, true, Err(SandboxDecisions)),
            (None, Some(Sandbox), true, Ok(Sandbox)),
            (None, Some(Production), true, Ok(Production)),
            (Some(Production), None, true, Ok(Production)),
            (Some(Production), Some(Production), false, Ok(Production)),
            (
                Some(Production),
                Some(Sandbox),
                false,
                Err(Mismatch { stored: Production, requested: Sandbox }),
            ),
            (Some(Sandbox), Some(Sandbox), true, Ok(Sandbox)),
            (Some(Sandbox), None, true, Err(Mismatch { stored: Sandbox, requested: Production })),
            (
                Some(Sandbox),
                Some(Production),
                false,
                Err(Mismatch { stored: Sandbox, requested: Production }),
            ),
        ];
        for (stored, requested, decisions, outcome) in cases {
            assert_eq!(
                on_start(stored, requested, decisions),
                outcome,
                "{stored:?} {requested:?} {decisions}"
            );
        }
    }

    #[test]
    fn a_refusal_names_both_environments_and_the_flag() {
        let message = Mismatch { stored: Sandbox, requested: Production }.to_string();
        assert!(message.contains("first started in sandbox") && message.contains("runs in production"));
        assert!(message.contains("--environment sandbox"), "{message}");
        assert_eq!("production".parse(), Ok(Production));
        assert!("Production".parse::<Environment>().is_err());
    }
}
