//! `keys init` and `keys import-local`: the platform's keys made where the
//! signer keeps them, and keys derived from the mnemonic moved into a
//! `pkcs11` token. On a `production` store each needs the key of an enabled
//! admin in `CUSTODY_INDEXER_OPERATOR_KEY`, and every key made or imported
//! is an audit entry (`key.made`, `key.imported`) by that admin.

use std::process::ExitCode;

use anyhow::{Context, anyhow, bail};
use clap::{ArgGroup, Subcommand};

use super::ChainFiles;
use crate::{
    audit::{self, Actor},
    chain::Family,
    environment::Environment,
    keys::{
        ISSUER_SIGNER_ENV, KeyError, KeyRef, MnemonicSigner, SIGNER_ENV, Scope,
        import::{self, Imported},
        init::{self, KeyState, PLATFORM},
        pkcs11::{Pkcs11Signer, TokenSettings},
        rules,
    },
    operators::{self, Action},
    store::Store,
};

/// The variable holding the acting admin's operator key.
const OPERATOR_KEY_ENV: &str = "CUSTODY_INDEXER_OPERATOR_KEY";

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Make the platform's keys (gas sponsor, omnibus wallet, settlement
    /// wallet, issuer) where the signer keeps them, for every family of the
    /// configured chains, when missing; print each with its address.
    /// Running it again makes nothing. An issuer key is refused for chains
    /// that already issue a stablecoin (its minter is fixed): import it.
    Init {
        #[command(flatten)]
        chain_files: ChainFiles,
        #[arg(long)]
        json: bool,
        /// Record the signer's platform keys where they differ from the
        /// addresses the store holds (a new token or KMS account): an
        /// audited decision (`key.accepted`); the old addresses' funds stay
        /// where they are.
        #[arg(long)]
        accept_new_keys: bool,
    },
    /// Move keys derived from the mnemonic (CUSTODY_INDEXER_MNEMONIC_FILE)
    /// into the pkcs11 token (CUSTODY_INDEXER_SIGNER=pkcs11): unextractable
    /// once there, at the same addresses. Fresh keys made in the token and
    /// a sweep are stronger: every copy of the phrase still signs for
    /// imported keys.
    #[command(group(ArgGroup::new("which").required(true).multiple(true).args(["accounts", "all", "platform"])))]
    ImportLocal {
        /// These accounts' keys (repeat, or comma-separated).
        #[arg(long = "account", value_name = "ID", value_delimiter = ',')]
        accounts: Vec<String>,
        /// Every account whose keys the service holds.
        #[arg(long)]
        all: bool,
        /// The sponsor's, omnibus wallet's, settlement wallet's and issuer's keys.
        #[arg(long)]
        platform: bool,
        #[command(flatten)]
        chain_files: ChainFiles,
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(store: &Store, command: KeysCommand) -> anyhow::Result<ExitCode> {
    let environment = store.environment().await?;
    let actor = actor(store, environment).await?;
    match command {
        KeysCommand::Init { chain_files, json, accept_new_keys } => {
            let chains = chain_files.load()?;
            let signer = super::transfers::signer(environment)?;
            let configs: Vec<_> = chains.iter().collect();
            let states = init::init(signer.as_ref(), &configs)?;
            let made: Vec<&str> =
                states.iter().filter(|s| s.state == "made").map(|s| s.label.as_str()).collect();
            record(store, &actor, "key.made", &made).await?;
            let families = families(&chains);
            crate::keys::pins::check(store, signer.as_ref(), &families, accept_new_keys.then_some(&actor))
                .await?;
            print_states(&states, json)?;
            let refused = states.iter().any(|s| s.state == "refused");
            Ok(if refused { ExitCode::FAILURE } else { ExitCode::SUCCESS })
        }
        KeysCommand::ImportLocal { accounts, all, platform, chain_files, json } => {
            let (local, token, issuer_token) = import_ends(environment)?;
            let mut keys = Vec::new();
            if platform {
                let chains = chain_files.load()?;
                for family in [Family::Evm, Family::Solana] {
                    if chains.iter().any(|c| c.chain.family() == family) {
                        for (role, key) in PLATFORM {
                            let recorded =
                                store.platform_key(role, crate::family::rules::name(family)).await?;
                            keys.push(((key, family), recorded));
                        }
                    }
                }
            }
            let accounts = if all {
                store.account_keys().await?.into_iter().map(|(id, _)| id).collect()
            } else {
                accounts
            };
            for id in &accounts {
                let index = store
                    .account_key(id)
                    .await?
                    .ok_or_else(|| anyhow!("account {id}: the service holds no key for it"))?;
                for address in store.account(id).await?.addresses {
                    let family =
                        address.chains.first().map(|c| c.family()).context("an address without chains")?;
                    keys.push(((KeyRef::Account(index), family), Some(address.address)));
                }
            }
            let mut done = Vec::new();
            for (key, recorded) in &keys {
                // The issuer's key goes to the issuer's own token, if it has one.
                let into = match (key.0, &issuer_token) {
                    (KeyRef::Issuer, Some(issuer)) => issuer,
                    _ => &token,
                };
                match import::import(&local, into, *key, recorded.as_deref()).await {
                    Ok(imported) => {
                        // Each key recorded as soon as it is in the token.
                        if imported.state == "imported" {
                            record(store, &actor, "key.imported", &[imported.label.as_str()]).await?;
                        }
                        done.push(imported);
                    }
                    Err(error) => {
                        print_imported(&done, json)?;
                        return Err(error.into());
                    }
                }
            }
            print_imported(&done, json)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The chain families `chains` configure.
fn families(chains: &crate::config::Chains) -> Vec<Family> {
    let mut families: Vec<Family> = chains.iter().map(|c| c.chain.family()).collect();
    families.sort_by_key(|f| crate::family::rules::name(*f));
    families.dedup();
    families
}

/// Who runs the command: on a production store, the enabled admin whose
/// operator key is in `CUSTODY_INDEXER_OPERATOR_KEY`; elsewhere the
/// operating-system user.
async fn actor(store: &Store, environment: Option<Environment>) -> anyhow::Result<Actor> {
    if environment != Some(Environment::Production) {
        return Ok(Actor::local(None));
    }
    let needs = || {
        anyhow!(
            "on a production store, keys commands need {OPERATOR_KEY_ENV}: the live key of an enabled admin"
        )
    };
    let token = std::env::var(OPERATOR_KEY_ENV).map_err(|_| needs())?;
    crate::api_key::pepper::for_keys(store).await?;
    let operator = operators::authenticate(store, token.trim()).await?.ok_or_else(needs)?;
    operators::rules::permits(&operator, Action::Keys)?;
    Ok(Actor::Operator { id: operator.id, name: operator.name })
}

/// One audit entry per key `labels` names, by `actor`, in one transaction.
async fn record(store: &Store, actor: &Actor, action: &str, labels: &[&str]) -> anyhow::Result<()> {
    if labels.is_empty() {
        return Ok(());
    }
    let mut tx = store.begin().await?;
    for label in labels {
        audit::append(&mut tx, None, crate::keys::pins::entry(actor, action, label)).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Both ends of an import: the mnemonic the keys are derived from, and the
/// token they go into (the one command where both are set at once), with
/// the issuer's own token when `CUSTODY_INDEXER_ISSUER_SIGNER=pkcs11`.
fn import_ends(
    environment: Option<Environment>,
) -> anyhow::Result<(MnemonicSigner, Pkcs11Signer, Option<Pkcs11Signer>)> {
    if std::env::var(SIGNER_ENV).ok().as_deref().map(str::trim) != Some("pkcs11") {
        bail!(
            "keys import-local moves keys into a pkcs11 token: set {SIGNER_ENV}=pkcs11 and its token's settings"
        );
    }
    let local = MnemonicSigner::from_env()?.ok_or(KeyError::Missing)?;
    let token = Pkcs11Signer::open(&TokenSettings::from_env()?)?;
    let issuer = match std::env::var(ISSUER_SIGNER_ENV).ok().as_deref().map(str::trim) {
        None | Some("") => None,
        Some("pkcs11") => {
            let env = |name: &str| std::env::var(name).ok();
            Some(Pkcs11Signer::open(&TokenSettings::from_vars(Scope::Issuer, env)?)?)
        }
        Some(other) => bail!(
            "{ISSUER_SIGNER_ENV}={other}: keys import-local moves keys into pkcs11 tokens only; unset it to import \
             the issuer's key into the main token, or make a fresh issuer key where it lives"
        ),
    };
    if let Some(environment) = environment {
        for token in std::iter::once(&token).chain(issuer.as_ref()) {
            let backend = crate::keys::Signer::backend(token);
            if let Some(warning) =
                rules::may_sign_with(environment, &backend, rules::local_keys_allowed_by_env())?
            {
                eprintln!("warning: {warning}");
            }
        }
    }
    Ok((local, token, issuer))
}

fn print_states(states: &[KeyState], json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(states)?);
        return Ok(());
    }
    for s in states {
        match (&s.address, &s.reason) {
            (Some(address), _) => println!("{:<44} {address}  {}", s.label, s.state),
            (None, reason) => println!("{:<44} refused: {}", s.label, reason.as_deref().unwrap_or_default()),
        }
    }
    Ok(())
}

fn print_imported(done: &[Imported], json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(done)?);
        return Ok(());
    }
    for i in done {
        println!("{:<44} {}  {}", i.label, i.address, i.state);
    }
    Ok(())
}
