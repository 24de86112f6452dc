//! What a running `dev` tells: the JSON line of `dev --json` (also its
//! `dev.json`, which `dev deposit` and the others read), or the guide it
//! prints for a person: keys, addresses and commands to paste.

use std::{collections::BTreeMap, path::PathBuf};

use serde::{Deserialize, Serialize};

use super::{DEFAULT_STATE_DIR, people, seed::Asset};
use crate::{chain::Chain, environment::Environment};

/// What a running `dev` serves: the JSON line of `dev --json`, and the
/// content of its `dev.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Summary {
    pub environment: Environment,
    pub api_url: String,
    pub api_key: String,
    pub organization: String,
    pub identity_id: String,
    pub account_id: String,
    pub database_url: String,
    pub chains_dir: PathBuf,
    pub addresses: BTreeMap<Chain, String>,
    pub rpc_urls: BTreeMap<Chain, String>,
    pub assets: BTreeMap<Chain, Vec<Asset>>,
    /// With `--webhook-url` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<WebhookSummary>,
    /// The NATS server events are published to (`--nats`, `--nats-url`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nats_url: Option<String>,
    /// The console's address.
    #[serde(default)]
    pub console_url: String,
    /// The one-time link where the dev organization's console admin
    /// (`admin@dev.example`) sets a password.
    #[serde(default)]
    pub console_enrol_url: String,
    /// The operators' one-time links: compliance, then treasury.
    #[serde(default)]
    pub operator_enrol_urls: Vec<String>,
    /// The operators' keys, in the same order, for the command line's
    /// `--server` commands (`CUSTODY_INDEXER_OPERATOR_KEY`).
    #[serde(default)]
    pub operator_keys: Vec<String>,
    /// The chains whose local node is being built: each joins when it is,
    /// and `dev` then prints its line again with them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub joining: Vec<Chain>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WebhookSummary {
    pub id: String,
    pub url: String,
    pub signing_secret: String,
}

/// What the user sees once the API listens: the JSON line, or the guide.
pub(super) fn print_ready(summary: &Summary, dir: &std::path::Path, json: bool) {
    if json {
        println!("{}", serde_json::to_string(summary).expect("a summary serializes"));
        return;
    }
    println!("{}", guide(summary, dir));
}

/// The console's lines of the guide: its address, the one-time links and
/// the operators' keys.
fn console_lines(s: &Summary) -> String {
    let mut out = format!("  console    {}\n", s.console_url);
    if !s.console_enrol_url.is_empty() {
        out.push_str(&format!(
            "             {} sets a password (once) at {}\n",
            people::ADMIN_EMAIL,
            s.console_enrol_url
        ));
    }
    let roles = ["compliance", "treasury"];
    for ((role, link), key) in roles.iter().zip(&s.operator_enrol_urls).zip(&s.operator_keys) {
        out.push_str(&format!("  operator   {role:<10} enrol {link}\n             {:<10} key {key}\n", ""));
    }
    out
}

/// The guide `dev` prints: keys, addresses and commands to paste.
fn guide(s: &Summary, dir: &std::path::Path) -> String {
    let api = &s.api_url;
    let auth = format!("-H 'Authorization: Bearer {}'", s.api_key);
    let mut out = format!(
        "\ncustody-indexer dev is running (sandbox) — stop it with Ctrl-C.\n\n  API        {api}\n  API key    {}\n  \
         organization {}   identity {}   account {}\n",
        s.api_key, s.organization, s.identity_id, s.account_id
    );
    for (chain, address) in &s.addresses {
        let rpc = s.rpc_urls.get(chain).map(String::as_str).unwrap_or("");
        let tokens: Vec<String> = s
            .assets
            .get(chain)
            .into_iter()
            .flatten()
            .map(|a| format!("{} {}", a.symbol, a.contract_address))
            .collect();
        out.push_str(&format!(
            "  {:<17} {address}\n  {:<17} node {rpc}; {}\n",
            chain.as_str(),
            "",
            tokens.join(", ")
        ));
    }
    for chain in &s.joining {
        out.push_str(&format!(
            "  {:<17} joins once its local network is built (in the background: the first build takes minutes)\n",
            chain.as_str()
        ));
    }
    out.push_str(&console_lines(s));
    out.push_str(&format!("  store      {}\n  chains     {}\n", s.database_url, s.chains_dir.display()));
    if let Some(webhook) = &s.webhook {
        out.push_str(&format!("  webhook    {}  signing secret {}\n", webhook.url, webhook.signing_secret));
    }
    if let Some(nats) = &s.nats_url {
        out.push_str(&format!(
            "  events     {nats}  stream CUSTODY_EVENTS, subjects custody.events.{}.<event type>\n",
            crate::events::subject::token(&s.organization)
        ));
    }
    let state = if dir.ends_with(DEFAULT_STATE_DIR) && dir.parent() == std::env::current_dir().ok().as_deref()
    {
        String::new()
    } else {
        format!(" --state-dir {}", dir.display())
    };
    let (chain, to) = match s.addresses.keys().next() {
        Some(&Chain::EthereumTestnet) | None => {
            ("ETHEREUM_TESTNET", "0x000000000000000000000000000000000000dEaD")
        }
        Some(_) => ("SOLANA_DEVNET", "11111111111111111111111111111112"),
    };
    out.push_str(&format!(
        "\nTry it, in another terminal:\n\n  \
         # a simulated wire of 25 USD, minted as 25 USDC to the account (PENDING, then CONFIRMED within seconds)\n  \
         custody-indexer dev deposit{state} --chain {chain} --asset USDC --amount 25 --follow\n\n  \
         # the account's deposits\n  curl -s {auth} '{api}/v2/crypto/deposits?account_id={}'\n\n  \
         # the organization's events (deposit_v2, …), oldest first\n  curl -s {auth} '{api}/v2/events'\n\n  \
         # send 1 USDC out of the account\n  curl -s -X POST {auth} -H 'Content-Type: application/json' {api}/v2/crypto/transfers \\\n    \
         -d '{{\"request_id\":\"'$(python3 -c 'import uuid; print(uuid.uuid4())')'\",\"account_id\":\"{}\",\"amount\":\"1\",\"currency_symbol\":\"USDC\",\
         \"address_destination\":{{\"address\":\"{to}\",\"chain\":\"{chain}\"}}}}'\n",
        s.account_id, s.account_id
    ));
    out
}
