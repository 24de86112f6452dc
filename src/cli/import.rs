//! `accounts import`: many accounts from a CSV or JSON-lines file. The whole
//! file is read and checked first, and a bad line is named; then every
//! account is registered in one transaction, so a file is imported whole or
//! not at all.

use std::{collections::HashMap, path::Path, str::FromStr};

use anyhow::{Context, bail};
use chrono::DateTime;
use serde::Deserialize;

use crate::{
    account::{AccountAddress, AccountType, DEFAULT_ORGANIZATION},
    chain::Chain,
    store::{NewAccount, Store, StoreError, WatchFrom},
};

/// One line: an account and one of its addresses. Several lines with the same
/// `account_id` give that account several addresses.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    account_id: String,
    identity_id: String,
    #[serde(rename = "type")]
    kind: String,
    address: String,
    /// CSV: chains separated by `;` or spaces; JSON: a list or such a string.
    chains: Chains,
    #[serde(default)]
    organization: Option<String>,
    #[serde(default, alias = "from_slot")]
    from_block: Option<u64>,
    #[serde(default)]
    from_time: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Chains {
    List(Vec<String>),
    Text(String),
}

/// What an import registered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Imported {
    pub accounts: usize,
    pub addresses: usize,
}

/// Reads `path` (CSV with a header line, or JSON lines: by the `.csv`
/// extension, else by the first character) and registers its accounts.
pub async fn import(store: &Store, path: &Path) -> anyhow::Result<Imported> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let csv = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("csv"))
        || !text.trim_start().starts_with('{');
    let lines = if csv { csv_lines(&text)? } else { json_lines(&text)? };
    if lines.is_empty() {
        bail!("{} holds no account", path.display());
    }
    let Parsed { accounts, places } = accounts(lines)?;
    let addresses = accounts.iter().map(|a| a.addresses.len()).sum();
    match crate::keys::accounts::add_accounts(store, &accounts).await {
        Ok(()) => Ok(Imported { accounts: accounts.len(), addresses }),
        Err(StoreError::Taken { key, message }) => {
            let line = places.iter().find(|(place, _)| *place == key).map(|(_, line)| *line);
            match line {
                Some(line) => bail!("line {line}: {message}; nothing was imported"),
                None => bail!("{message}; nothing was imported"),
            }
        }
        Err(error) => Err(anyhow::Error::from(error).context("nothing was imported")),
    }
}

/// `(line number, line)` of a CSV file with a header.
fn csv_lines(text: &str) -> anyhow::Result<Vec<(u64, Line)>> {
    let mut reader = csv::ReaderBuilder::new().trim(csv::Trim::All).from_reader(text.as_bytes());
    let mut lines = Vec::new();
    for record in reader.deserialize::<Line>() {
        match record {
            Ok(line) => lines.push((lines.len() as u64 + 2, line)),
            Err(error) => {
                let at = error.position().map_or(lines.len() as u64 + 2, |p| p.line());
                bail!("line {at}: {}; nothing was imported", csv_reason(&error));
            }
        }
    }
    Ok(lines)
}

fn csv_reason(error: &csv::Error) -> String {
    match error.kind() {
        csv::ErrorKind::Deserialize { err, .. } => err.to_string(),
        _ => error.to_string(),
    }
}

fn json_lines(text: &str) -> anyhow::Result<Vec<(u64, Line)>> {
    let mut lines = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        if raw.trim().is_empty() {
            continue;
        }
        let line = serde_json::from_str(raw)
            .map_err(|e| anyhow::anyhow!("line {}: {e}; nothing was imported", i + 1))?;
        lines.push((i as u64 + 1, line));
    }
    Ok(lines)
}

/// Accounts from checked lines, and the line where each account id and
/// address on each chain first appears, under the key the store names it
/// by when it is taken (`account:<id>`, `address:<CHAIN>:<address>`).
struct Parsed {
    accounts: Vec<NewAccount>,
    places: Vec<(String, u64)>,
}

fn accounts(lines: Vec<(u64, Line)>) -> anyhow::Result<Parsed> {
    let mut accounts: Vec<NewAccount> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut places: Vec<(String, u64)> = Vec::new();
    let mut seen: HashMap<(Chain, String), u64> = HashMap::new();
    for (number, line) in lines {
        let (account, canonical) =
            parse(line).map_err(|e| anyhow::anyhow!("line {number}: {e}; nothing was imported"))?;
        for chain in &account.addresses[0].chains {
            if let Some(first) = seen.insert((*chain, canonical.clone()), number) {
                bail!(
                    "line {number}: address {canonical} on {chain} is already on line {first}; nothing was imported"
                );
            }
        }
        for chain in &account.addresses[0].chains {
            places.push((format!("address:{chain}:{canonical}"), number));
        }
        match index.get(&account.id) {
            Some(&i) => {
                let known = &mut accounts[i];
                if (&known.identity_id, known.kind, &known.organization, known.watch_from)
                    != (&account.identity_id, account.kind, &account.organization, account.watch_from)
                {
                    bail!(
                        "line {number}: account {} differs from its earlier lines; nothing was imported",
                        account.id
                    );
                }
                known.addresses.extend(account.addresses);
            }
            None => {
                places.push((format!("account:{}", account.id), number));
                index.insert(account.id.clone(), accounts.len());
                accounts.push(account);
            }
        }
    }
    Ok(Parsed { accounts, places })
}

/// One line as an account with one address, and that address in canonical form.
fn parse(line: Line) -> Result<(NewAccount, String), String> {
    let chains = match line.chains {
        Chains::List(list) => list,
        Chains::Text(text) => {
            text.split([';', ' ', ',']).filter(|c| !c.is_empty()).map(String::from).collect()
        }
    };
    let chains: Vec<Chain> =
        chains.iter().map(|c| Chain::from_str(c).map_err(|e| e.to_string())).collect::<Result<_, _>>()?;
    let Some(first) = chains.first() else { return Err("no chain given".into()) };
    if chains.iter().any(|c| c.family() != first.family()) {
        return Err(
            "an address belongs to one chain family; list EVM and Solana chains on separate lines".into()
        );
    }
    let canonical =
        crate::family::rules::normalize(first.family(), &line.address).map_err(|e| e.to_string())?;
    let watch_from = watch_from(line.from_block, line.from_time.as_deref(), &chains)?;
    let kind = AccountType::from_str(&line.kind).map_err(|e| e.to_string())?;
    if line.account_id.trim().is_empty() || line.identity_id.trim().is_empty() {
        return Err("account_id and identity_id must not be empty".into());
    }
    let account = NewAccount {
        id: line.account_id,
        organization: line
            .organization
            .filter(|o| !o.is_empty())
            .unwrap_or_else(|| DEFAULT_ORGANIZATION.into()),
        identity_id: line.identity_id,
        request_id: None,
        kind,
        addresses: vec![AccountAddress { chains, address: canonical.clone() }],
        watch_from,
    };
    Ok((account, canonical))
}

/// Where a new address's watch begins: a block (slot) of its one chain, a
/// time (RFC 3339), or its registration.
pub fn watch_from(block: Option<u64>, time: Option<&str>, chains: &[Chain]) -> Result<WatchFrom, String> {
    match (block, time.filter(|t| !t.is_empty())) {
        (Some(_), Some(_)) => Err("give a start block (slot) or a start time, not both".into()),
        (Some(_), None) if chains.len() > 1 => Err(
            "a start block (slot) belongs to one chain; register one chain per line, or give a start time"
                .into(),
        ),
        (Some(block), None) => Ok(WatchFrom::Block(block)),
        (None, Some(time)) => DateTime::parse_from_rfc3339(time)
            .map(|t| WatchFrom::Time(t.timestamp_micros()))
            .map_err(|e| format!("start time {time:?} is not RFC 3339 ({e})")),
        (None, None) => Ok(WatchFrom::Registration),
    }
}
