//! `dev`'s people: the dev organization's console admin and two operators,
//! `compliance` and `treasury` (no `admin`, so the bootstrap stays
//! available on dev's store), made once with a fresh store. Their enrol
//! links' paths and the operators' keys are kept in the state directory
//! (`people.json`, readable by its owner only) and printed at every start.

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::state::{StateDir, write_secret};
use crate::{
    audit::Actor,
    environment::Environment,
    operators::{NewOperator, Role, manage},
    people::{self, rules::TenantRole},
    pii::{Key, KeySource},
    store::Store,
};

/// The tenant admin's email.
pub const ADMIN_EMAIL: &str = "admin@dev.example";

/// What `dev` prints of its people. `Debug` shows none of it.
#[derive(Clone, Default, Serialize, Deserialize)]
pub struct People {
    /// `/console/enrol/<token>` of the tenant admin.
    pub console_enrol_path: String,
    /// The operators' enrol paths: compliance, then treasury.
    pub operator_enrol_paths: Vec<String>,
    /// The operators' keys, in the same order.
    pub operator_keys: Vec<String>,
}

impl std::fmt::Debug for People {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("People").field("operators", &self.operator_keys.len()).finish_non_exhaustive()
    }
}

/// The people of dev's store: made on a fresh store, read back on a kept
/// one (a kept store of a release before the console gets them now, when
/// it can: a store whose operators include an admin keeps its own).
pub async fn seed(
    url: &str,
    pii: Key,
    state: &StateDir,
    organization: &str,
    kept: bool,
) -> anyhow::Result<People> {
    let path = state.file("people.json");
    if kept && let Ok(text) = std::fs::read_to_string(&path) {
        return serde_json::from_str(&text)
            .with_context(|| format!("{} is not dev's people", path.display()));
    }
    match make(url, pii, organization).await {
        Ok(made) => {
            write_secret(&path, serde_json::to_string_pretty(&made)?.as_bytes())?;
            Ok(made)
        }
        Err(error) if kept => {
            tracing::warn!(
                error = format!("{error:#}"),
                "dev's console people were not made on the kept store"
            );
            Ok(People::default())
        }
        Err(error) => Err(error),
    }
}

async fn make(url: &str, pii: Key, organization: &str) -> anyhow::Result<People> {
    let store = crate::start::unlock_pii(&Store::open(url).await?, KeySource::Given(pii)).await?;
    let dev = Actor::local(Some("dev".into()));
    let admin = people::invite(&store, organization, (ADMIN_EMAIL, TenantRole::Admin), &dev, None).await?;
    let mut made = People { console_enrol_path: admin.enrol_path, ..People::default() };
    let operators = [
        ("Casey Compliance", "compliance@dev.example", Role::Compliance),
        ("Tate Treasury", "treasury@dev.example", Role::Treasury),
    ];
    for (name, email, role) in operators {
        let new = NewOperator { name: name.into(), email: email.into(), roles: vec![role] };
        let created = manage::bootstrap(&store, Environment::Sandbox, &dev, new).await?;
        made.operator_enrol_paths.push(created.enrol_path);
        made.operator_keys.extend(created.key.map(|key| key.token.to_string()));
    }
    store.close().await;
    Ok(made)
}
