//! Who a deciding command acts as. Through the service (`--server`, or
//! `CUSTODY_INDEXER_SERVER`), the actor is the operator whose key is in
//! `CUSTODY_INDEXER_OPERATOR_KEY`, and `--by` is refused. On the store
//! directly: on a `production` store only with `--break-glass`, by the
//! enabled operator whose key is in `CUSTODY_INDEXER_OPERATOR_KEY` and who
//! holds the role the decision needs (recorded as `break-glass:<operator>`
//! beside the process's real user, never a second pair of eyes); in
//! `sandbox` and on a store not yet stamped, as `local:<os user>` with the
//! `--by` given.

use anyhow::{anyhow, bail};
use clap::Args;

use super::server::Server;
use crate::{
    audit::Actor,
    environment::Environment,
    operators::{self, Action, rules},
    store::Store,
};

/// The variable holding the acting operator's key.
const OPERATOR_KEY_ENV: &str = "CUSTODY_INDEXER_OPERATOR_KEY";

#[derive(Debug, Clone, Args)]
pub struct Deciding {
    /// Act through the service at this URL, as the operator whose key is in
    /// CUSTODY_INDEXER_OPERATOR_KEY.
    #[arg(long, env = "CUSTODY_INDEXER_SERVER")]
    pub server: Option<String>,
    /// On the store directly: the operator's name, recorded beside the
    /// operating-system user. Refused with --server.
    #[arg(long)]
    pub by: Option<String>,
    /// On a production store directly, in an emergency: recorded as a
    /// break-glass decision of the operator whose key is in
    /// CUSTODY_INDEXER_OPERATOR_KEY (needs --reason).
    #[arg(long)]
    pub break_glass: bool,
}

/// Where a decision is taken.
pub enum Via {
    Server(Server),
    Store(Actor),
}

impl Deciding {
    /// The `--by` given, trimmed, if any.
    pub fn local_by(&self) -> Option<String> {
        self.by.as_deref().map(str::trim).filter(|b| !b.is_empty()).map(str::to_string)
    }

    /// Where to act, on `store`'s environment; `reason` is the command's,
    /// `action` what it decides (the role a break-glass key must hold).
    pub async fn via(&self, store: &Store, reason: Option<&str>, action: Action) -> anyhow::Result<Via> {
        if let Some(url) = &self.server {
            if self.by.is_some() {
                bail!("--by is refused with --server: the decision is the operator key's");
            }
            if self.break_glass {
                bail!("--break-glass acts on the store directly: drop --server");
            }
            return Ok(Via::Server(Server::from_env(url)?));
        }
        let production = store.environment().await? == Some(Environment::Production);
        match (production, self.break_glass) {
            (true, false) => bail!(
                "this is a production store: decisions go through the service (--server URL or \
                 CUSTODY_INDEXER_SERVER, with CUSTODY_INDEXER_OPERATOR_KEY); in an emergency, --break-glass \
                 --reason TEXT acts on the store directly and is recorded as such"
            ),
            (true, true) if reason.is_none_or(|r| r.trim().is_empty()) => {
                bail!("--break-glass needs --reason: why the service could not be used")
            }
            (true, true) if self.by.is_some() => {
                bail!("--by is refused with --break-glass: a break-glass decision is its operator key's")
            }
            (true, true) => Ok(Via::Store(break_glass(store, action).await?)),
            (false, glass) => {
                if glass {
                    bail!("--break-glass is for a production store; this one is not");
                }
                Ok(Via::Store(Actor::local(self.local_by())))
            }
        }
    }
}

/// The break-glass actor: the enabled operator whose key is in
/// `CUSTODY_INDEXER_OPERATOR_KEY`, holding the role `action` needs.
async fn break_glass(store: &Store, action: Action) -> anyhow::Result<Actor> {
    let operator = glass_operator(store, action).await?;
    Ok(Actor::break_glass(&operator.id, &operator.name))
}

/// The operator breaking glass: the enabled (and not suspended) operator
/// whose key is in `CUSTODY_INDEXER_OPERATOR_KEY`, checked under the
/// process's pepper as the service checks it, holding the role `action`
/// needs.
pub async fn glass_operator(store: &Store, action: Action) -> anyhow::Result<operators::Operator> {
    let roles: Vec<&str> = action.roles().iter().map(|r| r.as_str()).collect();
    let needs = || {
        anyhow!(
            "--break-glass needs {OPERATOR_KEY_ENV}: the live key of an enabled operator holding the `{}` role",
            roles.join("` or `")
        )
    };
    let token = std::env::var(OPERATOR_KEY_ENV).map_err(|_| needs())?;
    crate::api_key::pepper::for_keys(store).await?;
    let operator = operators::authenticate(store, token.trim()).await?.ok_or_else(needs)?;
    rules::permits(&operator, action)?;
    Ok(operator)
}
