//! `audit`: the log of every decision. `list` reads it; `verify` checks its
//! chain, the database's guards, every principal's row against it and
//! signed checkpoints kept elsewhere; `keygen` makes the checkpoints' key
//! and `checkpoint` signs the head with it.

use std::{path::PathBuf, process::ExitCode};

use anyhow::{Context, bail};
use clap::Subcommand;
use serde_json::json;

use crate::{
    audit::{
        self, chain,
        checkpoint::{self, Checkpoint, KEY_FILE_ENV, PUBLIC_KEY_ENV},
        schedule, verify,
    },
    store::{Store, now_micros},
};

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// The audit log, oldest first.
    List {
        /// Entries after this `seq`.
        #[arg(long, default_value_t = 0)]
        since: i64,
        #[arg(long)]
        organization: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Checks every entry's hash and link and the head, the database's
    /// guards, every operator, role, operator key and API key row against
    /// the log, and each checkpoint given: exits 0, or 1 naming what does
    /// not match.
    Verify {
        /// A checkpoint (`audit checkpoint`'s output) the log must still
        /// hold; repeat for several.
        #[arg(long = "checkpoint", value_name = "FILE")]
        checkpoints: Vec<PathBuf>,
        /// The checkpoints' public key (base64, as `audit keygen` printed
        /// it); never read from a checkpoint or the store.
        #[arg(long, value_name = "KEY", env = PUBLIC_KEY_ENV)]
        public_key: Option<String>,
    },
    /// Records that entry SEQ (after the log's authentication, its MAC
    /// failing: written outside the service) was found: `verify` lists it
    /// as acknowledged from then on, and it stays no authority. In
    /// `production` an admin acknowledges through the service (`--server`);
    /// on a `sandbox` store, with the pepper, on the store.
    Acknowledge {
        seq: i64,
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        server: super::server::ServerArg,
    },
    /// Records that the store was restored past the newest signed
    /// checkpoint (FILE): checkpoints resume from the restored head, and
    /// each configured chain waits for `transfers recover`. An admin, through
    /// the service in production (`--server`); on the store directly with
    /// `--break-glass` when no service can start.
    AcknowledgeRestore {
        #[arg(long = "checkpoint", value_name = "FILE")]
        checkpoint: PathBuf,
        #[arg(long)]
        reason: String,
        /// The checkpoints' public key (base64), on the store directly.
        #[arg(long, value_name = "KEY", env = PUBLIC_KEY_ENV)]
        public_key: Option<String>,
        #[command(flatten)]
        chain_files: super::ChainFiles,
        #[command(flatten)]
        deciding: super::decider::Deciding,
    },
    /// Makes the checkpoints' Ed25519 key in a new file (PKCS#8 PEM,
    /// readable by its owner only) and prints its public key.
    Keygen {
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
    },
    /// Signs the log's head with the key of `CUSTODY_INDEXER_AUDIT_KEY_FILE`
    /// once its chain verifies; prints `{"seq","hash","at","signature"}`.
    Checkpoint {
        /// Also write it to this file; a checkpoint already there must
        /// still be held by the log, or nothing is signed.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        #[arg(long = "key-file", value_name = "FILE", env = KEY_FILE_ENV, hide = true)]
        key_file: Option<PathBuf>,
    },
}

/// Entries read per page.
const PAGE: i64 = 1000;

pub async fn run(url: &str, command: AuditCommand) -> anyhow::Result<ExitCode> {
    if let AuditCommand::Keygen { out } = &command {
        return keygen(out);
    }
    if let AuditCommand::AcknowledgeRestore { checkpoint, reason, public_key, chain_files, deciding } =
        &command
    {
        let given = (reason.as_str(), public_key.as_deref());
        super::restores::acknowledge_restore(url, checkpoint, given, chain_files, deciding).await?;
        return Ok(ExitCode::SUCCESS);
    }
    if let AuditCommand::Acknowledge { seq, reason, server: super::server::ServerArg { server: Some(url) } } =
        &command
    {
        let server = super::server::Server::from_env(url)?;
        let answer = server
            .post("/operator/v1/audit/acknowledgements", &json!({ "seq": seq, "reason": reason }))
            .await?;
        let (action, actor) =
            (answer["action"].as_str().unwrap_or("?"), answer["actor"].as_str().unwrap_or("?"));
        println!(
            "audit entry {seq} ({action} by {actor}): acknowledged by entry {}",
            answer["acknowledged_by"]
        );
        return Ok(ExitCode::SUCCESS);
    }
    // Read as it is: never migrated here, which would put back the guards
    // that `verify` looks for.
    let store = super::identities::unlock(Store::open_migrated(url).await?).await?;
    match command {
        AuditCommand::List { since, organization, json } => {
            let mut after = since;
            loop {
                let page = store.audit_entries(after, organization.as_deref(), PAGE).await?;
                for entry in &page {
                    print_entry(&store, entry, json)?;
                }
                match page.last() {
                    Some(last) if page.len() as i64 == PAGE => after = last.seq,
                    _ => break,
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        AuditCommand::Verify { checkpoints, public_key } => {
            verify_log(&store, &checkpoints, public_key.as_deref()).await
        }
        AuditCommand::Checkpoint { out, key_file } => {
            let Some(key_file) = key_file else {
                bail!("audit checkpoint signs with the key in the file {KEY_FILE_ENV} names: set it");
            };
            let key = checkpoint::read_key(&key_file)?;
            // The checkpoint it replaces must still be held.
            let previous = out
                .as_deref()
                .and_then(|out| std::fs::read_to_string(out).ok())
                .map(|text| Checkpoint::parse(&text, "--out"))
                .transpose()?;
            match verify::checkpoint(&store, &key, now_micros(), previous.as_ref()).await? {
                Ok(signed) => {
                    if let Some(out) = out {
                        schedule::save(&out, &signed)
                            .with_context(|| format!("writing {}", out.display()))?;
                    }
                    println!("{}", signed.json());
                    Ok(ExitCode::SUCCESS)
                }
                Err(broken) => {
                    println!("audit log BROKEN at seq {}: {}; it is not signed", broken.seq, broken.why);
                    Ok(ExitCode::from(1))
                }
            }
        }
        AuditCommand::Acknowledge { seq, reason, .. } => acknowledge_on_store(&store, seq, &reason).await,
        AuditCommand::Keygen { .. } | AuditCommand::AcknowledgeRestore { .. } => {
            unreachable!("answered above")
        }
    }
}

fn keygen(out: &std::path::Path) -> anyhow::Result<ExitCode> {
    let key = checkpoint::generate();
    checkpoint::write_key(out, &key)?;
    eprintln!(
        "checkpoint key written to {} (keep it away from the database's administrators)",
        out.display()
    );
    println!("{}", checkpoint::public_key_text(&key.verifying_key()));
    Ok(ExitCode::SUCCESS)
}

async fn verify_log(store: &Store, files: &[PathBuf], public_key: Option<&str>) -> anyhow::Result<ExitCode> {
    // A pepper file that cannot be read is an error, never "no pepper".
    crate::store::keyring::process()?;
    let mut checkpoints = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        checkpoints.push(Checkpoint::parse(&text, &file.display().to_string())?);
    }
    let public = match public_key {
        Some(text) => Some(checkpoint::parse_public_key(text)?),
        None if !checkpoints.is_empty() => {
            bail!(
                "a checkpoint is verified with --public-key KEY (or {PUBLIC_KEY_ENV}), never a key it carries"
            )
        }
        None => None,
    };
    let report = verify::verify(store, &checkpoints, public.as_ref()).await?;
    for broken in &report.broken {
        println!("audit log BROKEN at seq {}: {}", broken.seq, broken.why);
    }
    for guard in &report.unguarded {
        println!(
            "audit log UNGUARDED: {guard} is missing, disabled or changed (run `custody-indexer migrate`)"
        );
    }
    for finding in &report.unexplained {
        println!("audit log does not explain {finding}");
    }
    for entry in &report.unauthenticated {
        match entry.acknowledged_by {
            None => println!("audit entry {}: not authenticated", entry.seq),
            Some(by) => println!("audit entry {}: not authenticated, acknowledged by entry {by}", entry.seq),
        }
    }
    for row in &report.unsealed {
        println!("{row}: not authenticated (its row MAC does not match: written outside the service)");
    }
    print_macs(&report.macs);
    if !report.intact() {
        return Ok(ExitCode::from(1));
    }
    println!("audit log verified: {} entries, head {}", report.entries, report.head_hash);
    for held in &report.held {
        println!("checkpoint seq {} ({}) held", held.seq, held.hash);
    }
    for (lost, by) in &report.lost {
        println!("checkpoint seq {} ({}) lost in a restore, acknowledged by entry {by}", lost.seq, lost.hash);
    }
    Ok(ExitCode::SUCCESS)
}

/// How the entries' MACs were checked, and the principals in force when
/// the log was authenticated, for two admins to confirm.
fn print_macs(macs: &verify::Macs) {
    match macs {
        verify::Macs::NotChecked => println!("MACs not checked (no pepper)"),
        verify::Macs::NotYetAuthenticated => {
            println!("MACs not checked: the log is not authenticated yet (`run` or `serve` authenticates it)")
        }
        verify::Macs::Checked { entry } => {
            let detail = entry.detail.as_deref().and_then(audit::Detail::parse).unwrap_or_default();
            let head = detail.head_seq.unwrap_or_default();
            println!(
                "MACs checked from entry {}; entries 1 to {head} are before authentication (checked by the chain \
                 and the checkpoints)",
                entry.seq
            );
            let digest = detail.principals_sha256.unwrap_or_default();
            println!("principals in force at authentication (sha256 {digest}), to confirm:");
            for line in detail.principals.unwrap_or_default() {
                println!("  {line}");
            }
        }
    }
}

fn print_entry(store: &Store, entry: &chain::Entry, json: bool) -> anyhow::Result<()> {
    let reason = audit::reason(store.cipher().ok(), entry)?;
    let at = crate::deposits::resource::format_time(&crate::store::time(entry.at)?);
    if json {
        let mut value = serde_json::to_value(entry)?;
        value["reason"] = json!(reason);
        value["at"] = json!(at);
        println!("{value}");
        return Ok(());
    }
    let name = entry.actor_name.as_deref().map(|n| format!(" ({n})")).unwrap_or_default();
    let org = entry.organization_id.as_deref().map(|o| format!(" org {o}")).unwrap_or_default();
    let reason = reason.map(|r| format!(": {r}")).unwrap_or_default();
    println!(
        "{} {at} {}{name} {} {} {}{org}{reason}",
        entry.seq, entry.actor, entry.action, entry.target_kind, entry.target_id
    );
    Ok(())
}

/// `audit acknowledge` without `--server`: on a `sandbox` store only.
async fn acknowledge_on_store(store: &Store, seq: i64, reason: &str) -> anyhow::Result<ExitCode> {
    if store.environment().await? != Some(crate::environment::Environment::Sandbox) {
        bail!(
            "in production an admin acknowledges through the service: --server URL, with the admin's key in {}",
            super::server::OPERATOR_KEY_ENV
        );
    }
    let done = audit::acknowledge::acknowledge(store, &audit::Actor::local(None), seq, reason).await?;
    println!("audit entry {seq} ({} by {}): acknowledged by entry {}", done.action, done.actor, done.by);
    Ok(ExitCode::SUCCESS)
}
