//! The commands around sending: `wallets list`, `gas usage|platform` and
//! `limits create|list`.

use clap::Subcommand;
use serde::Serialize;

use super::ChainFiles;
use crate::{
    account::DEFAULT_ORGANIZATION,
    chain::Chain,
    environment::Environment,
    keys::{KeyError, KeyRef, Signer},
    store::{ChainGas, Store},
    transfers::limit_policies::create_limit_policy,
};

#[derive(Debug, Subcommand)]
pub enum WalletsCommand {
    /// The gas sponsor's and the omnibus wallet's address on every configured
    /// chain (never keys): fund the sponsor with each chain's coin.
    List {
        #[command(flatten)]
        chain_files: ChainFiles,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum GasCommand {
    /// Sponsored network fees per organization: spent, remaining credit and
    /// what is billable beyond it.
    Usage {
        /// One organization (default: every one).
        #[arg(long)]
        organization: Option<String>,
        #[command(flatten)]
        credit: crate::service::options::GasCredit,
        #[arg(long)]
        json: bool,
    },
    /// The platform's own network fees (nonce fillers), per chain: billed
    /// to no organization.
    Platform {
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum LimitsCommand {
    /// Add a policy limiting an account's or an identity's transfers of one asset.
    Create {
        #[arg(long, default_value = DEFAULT_ORGANIZATION)]
        organization: String,
        #[arg(long, conflicts_with = "identity_id", required_unless_present = "identity_id")]
        account_id: Option<String>,
        #[arg(long)]
        identity_id: Option<String>,
        /// The asset's symbol, e.g. USDC: the limit counts it on every chain.
        /// It must be listed (native or token) on a configured chain.
        #[arg(long)]
        currency_symbol: String,
        #[command(flatten)]
        chain_files: ChainFiles,
        /// The most one transfer may send (major unit).
        #[arg(long, value_name = "AMOUNT")]
        max_per_transfer: Option<String>,
        /// The most the scope may send in any 24 hours (major unit).
        #[arg(long = "max-24h", value_name = "AMOUNT")]
        max_rolling_24h: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// List an organization's policies.
    List {
        #[arg(long, default_value = DEFAULT_ORGANIZATION)]
        organization: String,
        #[arg(long)]
        json: bool,
    },
}

/// The signer the environment configures, required here, if `environment`
/// (the store's, or `CUSTODY_INDEXER_ENVIRONMENT` for a command without
/// one) allows its keys: production refuses keys this host can read
/// unless `CUSTODY_INDEXER_ALLOW_LOCAL_KEYS=true`, and then warns.
pub(super) fn signer(environment: Option<Environment>) -> anyhow::Result<std::sync::Arc<dyn Signer>> {
    let signer = crate::keys::guarded(crate::keys::from_env()?.ok_or(KeyError::Missing)?)?;
    let environment = environment.or_else(|| {
        std::env::var(crate::environment::ENVIRONMENT_ENV).ok().and_then(|v| v.trim().parse().ok())
    });
    if let Some(environment) = environment {
        let allowed = crate::keys::rules::local_keys_allowed_by_env();
        if let Some(warning) = crate::keys::rules::may_sign_with(environment, &signer.backend(), allowed)? {
            eprintln!("warning: {warning}");
        }
    }
    Ok(signer)
}

#[derive(Debug, Serialize)]
struct Wallet {
    chain: Chain,
    sponsor: String,
    omnibus: String,
    /// The key that mints the platform's stablecoins (`issuance deploy`).
    issuer: String,
    /// Receives what off-ramps pay out and sends back what a bank refuses
    /// or returns; on EVM chains it pays its own gas for that.
    settlement: String,
    /// Where the keys live (`local mnemonic`, `pkcs11 token "…"`).
    backend: String,
    /// Each key's name (its label in a token), by role.
    labels: std::collections::BTreeMap<&'static str, String>,
}

/// The sponsor's, the omnibus wallet's, the issuer's and the settlement
/// wallet's address on one chain.
fn wallet(signer: &dyn Signer, chain: Chain) -> Result<Wallet, KeyError> {
    let address = |key| crate::family::keys::key_address(signer, chain.family(), key);
    Ok(Wallet {
        chain,
        sponsor: address(KeyRef::Sponsor)?,
        omnibus: address(KeyRef::Omnibus)?,
        issuer: address(KeyRef::Issuer)?,
        settlement: address(KeyRef::Settlement)?,
        backend: signer.backend().to_string(),
        labels: [
            ("sponsor", KeyRef::Sponsor),
            ("omnibus", KeyRef::Omnibus),
            ("issuer", KeyRef::Issuer),
            ("settlement", KeyRef::Settlement),
        ]
        .into_iter()
        .map(|(role, key)| (role, crate::keys::describe(key, chain.family())))
        .collect(),
    })
}

pub fn wallets(command: WalletsCommand) -> anyhow::Result<()> {
    let WalletsCommand::List { chain_files, json } = command;
    let chains = chain_files.load()?;
    let signer = signer(None)?;
    let wallets = chains.iter().map(|c| wallet(signer.as_ref(), c.chain)).collect::<Result<Vec<_>, _>>()?;
    if json {
        println!("{}", serde_json::to_string_pretty(&wallets)?);
    } else {
        for w in &wallets {
            println!("{} ({})", w.chain, w.backend);
            for (role, address) in [
                ("sponsor", &w.sponsor),
                ("omnibus", &w.omnibus),
                ("issuer", &w.issuer),
                ("settlement", &w.settlement),
            ] {
                println!("  {role:<10} {address}  {}", w.labels[role]);
            }
        }
    }
    Ok(())
}

pub async fn gas(store: &Store, command: GasCommand) -> anyhow::Result<()> {
    let (organization, credit, json) = match command {
        GasCommand::Usage { organization, credit, json } => (organization, credit, json),
        GasCommand::Platform { json } => return platform_gas(store, json).await,
    };
    let organizations = match organization {
        Some(id) => vec![id],
        None => store.organizations().await?.into_iter().map(|o| o.id).collect(),
    };
    let mut usage = Vec::with_capacity(organizations.len());
    for organization in &organizations {
        usage.push(store.gas_usage(organization, credit.usd_micros).await?);
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&usage)?);
        return Ok(());
    }
    for u in &usage {
        println!(
            "{}: spent {} USD of {} USD credit, {} USD remaining, {} USD billable",
            u.organization_id, u.spent_usd, u.credit_usd, u.remaining_credit_usd, u.billable_usd
        );
        print_chains(&u.by_chain);
    }
    Ok(())
}

/// `gas platform`: the ledger's entries billed to no organization.
async fn platform_gas(store: &Store, json: bool) -> anyhow::Result<()> {
    let by_chain = store.platform_gas().await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&by_chain)?);
        return Ok(());
    }
    println!("platform: own cost, billed to no organization");
    print_chains(&by_chain);
    Ok(())
}

fn print_chains(by_chain: &[ChainGas]) {
    for c in by_chain {
        println!(
            "  {} {} {} ({} USD, {} transactions)",
            c.chain, c.amount, c.currency_symbol, c.usd, c.transactions
        );
    }
}

pub async fn limits(store: &Store, command: LimitsCommand) -> anyhow::Result<()> {
    match command {
        LimitsCommand::Create {
            organization,
            account_id,
            identity_id,
            currency_symbol,
            max_per_transfer,
            max_rolling_24h,
            chain_files,
            json,
        } => {
            let chains = chain_files.load()?;
            if !chains.iter().any(|c| c.decimals_of(&currency_symbol).is_some()) {
                anyhow::bail!(
                    "{currency_symbol} is not listed on any configured chain: a policy on it would never apply"
                );
            }
            let policy = create_limit_policy(
                store,
                &organization,
                account_id.as_deref(),
                identity_id.as_deref(),
                &currency_symbol,
                max_per_transfer.as_deref(),
                max_rolling_24h.as_deref(),
            )
            .await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&policy)?);
            } else {
                println!("{}", policy.id);
            }
        }
        LimitsCommand::List { organization, json } => {
            let policies = store.limit_policies(&organization).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&policies)?);
            } else if policies.is_empty() {
                println!("no policies");
            } else {
                for p in &policies {
                    let scope = p.account_id.as_ref().map_or_else(
                        || format!("identity {}", p.identity_id.as_deref().unwrap_or_default()),
                        |a| format!("account {a}"),
                    );
                    println!(
                        "{} {} {}: per transfer {}, 24 h {}",
                        p.id,
                        scope,
                        p.currency_symbol,
                        p.max_per_transfer.as_deref().unwrap_or("-"),
                        p.max_rolling_24h.as_deref().unwrap_or("-")
                    );
                }
            }
        }
    }
    Ok(())
}
