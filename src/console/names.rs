//! People as the operator pages show them: an operator by name and e-mail,
//! a console user by e-mail, each beside the id the log records, so that a
//! reader sees who acted without looking the id up.

use std::collections::HashMap;

use crate::store::{Store, StoreError};

/// The operators, and the console users looked up so far.
pub struct Names {
    operators: HashMap<String, (String, String)>,
    users: HashMap<String, Option<String>>,
}

impl Names {
    pub async fn load(store: &Store) -> Result<Self, StoreError> {
        let operators = store.operators().await?.into_iter().map(|op| (op.id, (op.name, op.email))).collect();
        Ok(Names { operators, users: HashMap::new() })
    }

    /// `recorded` (an entry's actor, or a step's recorder) with the name
    /// and e-mail of the person it names: `Ann Ops <ann@…> (operator:op_…)`;
    /// as recorded when it names no one known.
    pub async fn of(&mut self, store: &Store, recorded: &str) -> Result<String, StoreError> {
        let person = match recorded.split_once(':') {
            Some(("operator" | "break-glass", id)) => {
                self.operators.get(id).map(|(name, email)| format!("{name} <{email}>"))
            }
            Some(("user", id)) => {
                if !self.users.contains_key(id) {
                    let email = store.console_user(id).await?.map(|user| format!("<{}>", user.email));
                    self.users.insert(id.to_string(), email);
                }
                self.users.get(id).cloned().flatten()
            }
            _ => None,
        };
        Ok(match person {
            Some(person) => format!("{person} ({recorded})"),
            None => recorded.to_string(),
        })
    }
}
