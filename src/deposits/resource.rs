//! The Deposit resource and what a watcher detects before it becomes one.

use std::{collections::HashMap, fmt, str::FromStr};

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Serialize, Serializer};
use utoipa::ToSchema;

use crate::{amount::Amount, chain::Chain};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum DepositStatus {
    Pending,
    Confirmed,
    Failed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SourceType {
    OnChain,
    Account,
}

/// Which transfer of its transaction a deposit is; with the chain and the
/// transaction hash it is the deposit's natural key. Every variant is fixed
/// by the transaction alone, never by where the block put it, so a reorg
/// that re-includes the transaction elsewhere finds the same deposit.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Position {
    /// The transaction's own value.
    Native,
    /// A token `Transfer` log, by what it moves and, among the transaction's
    /// `Transfer` logs that move exactly the same (same token, sender,
    /// receiver and amount), its occurrence in log order. A block-wide
    /// `logIndex` changes when the transaction moves; this does not, and it
    /// needs neither receipts nor the transaction's other logs.
    Log(TokenTransfer),
    /// An internal call carrying value, by its path in the call tree (`0.2.1`).
    Trace(String),
    /// Solana: the rise of a wallet's lamport balance.
    Lamports { wallet: String },
    /// Solana: the rise of a wallet's balance of a mint, over all its token accounts.
    Token { owner: String, mint: String },
}

/// The identity of a token `Transfer` log within its transaction.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TokenTransfer {
    /// The listed token's symbol, unique on its chain.
    pub symbol: String,
    /// Sender and receiver, lowercase hex.
    pub from: String,
    pub to: String,
    /// The amount in the token's smallest unit, in decimal.
    pub raw: String,
    /// 0 for the first such transfer of the transaction, then 1, 2, ….
    pub occurrence: u32,
}

impl TokenTransfer {
    pub fn new(symbol: &str, from: &str, to: &str, raw: &str, occurrence: u32) -> Self {
        Self {
            symbol: symbol.to_string(),
            from: from.to_ascii_lowercase(),
            to: to.to_ascii_lowercase(),
            raw: raw.to_string(),
            occurrence,
        }
    }
}

/// A transfer into a watched address, as decoded from a block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detected {
    pub chain: Chain,
    pub tx_hash: String,
    pub position: Position,
    pub block_number: u64,
    pub block_hash: String,
    /// The block's timestamp, milliseconds since the epoch: whole seconds
    /// unless the node serves milliseconds (Base's `timestampMs`).
    pub block_time_ms: u64,
    pub account_id: String,
    pub account_address: String,
    pub source_address: String,
    /// Set when the sender is itself a watched address of the platform. The
    /// store keeps it only when that account belongs to the receiver's
    /// organization.
    pub source_account_id: Option<String>,
    pub currency_symbol: String,
    pub amount: Amount,
}

/// One of the platform's own operational transactions, as the sender
/// recorded it before broadcasting: value it moves into a watched address
/// is the platform's, never a customer's deposit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum OwnKind {
    /// The sponsor's gas money sent to a `SEGREGATED` account's address.
    TopUp,
    /// A zero-value self-transfer cancelling a transfer at its nonce.
    Cancel,
    /// A zero-value self-transfer filling a nonce gap.
    NonceFiller,
}

/// A transfer into a watched address made by one of the platform's own
/// transactions: recorded for operators, never a deposit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OwnTransfer {
    pub chain: Chain,
    pub transaction_hash: String,
    pub kind: OwnKind,
    pub account_id: String,
    pub account_address: String,
    pub source_address: String,
    pub currency_symbol: String,
    pub amount: String,
    /// The block it was last seen in.
    pub block_number: u64,
    /// The block's timestamp.
    #[serde(serialize_with = "rfc3339")]
    pub created_at: DateTime<Utc>,
}

/// A scan's transfers, told apart by transaction: what the platform's own
/// transactions moved, and the customers' deposits (everything else).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Split<'a> {
    pub deposits: Vec<&'a Detected>,
    pub own: Vec<(&'a Detected, OwnKind)>,
}

/// Tells deposits from the platform's own transfers by transaction hash
/// alone, `own` being the hashes the sender recorded as operational. Never
/// by sender: a mint or a refund from a platform wallet is a deposit. Pure,
/// so every replay of the same transactions against the same hashes gives
/// the same answer.
pub fn split_own<'a>(detected: &'a [Detected], own: &HashMap<String, OwnKind>) -> Split<'a> {
    let mut split = Split::default();
    for d in detected {
        match own.get(&d.tx_hash) {
            Some(kind) => split.own.push((d, *kind)),
            None => split.deposits.push(d),
        }
    }
    split
}

/// A deposit exactly as the API serves it: the Deposit resource's fields and
/// no others, `source_account_id` only when set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Deposit {
    pub id: String,
    pub dedup_key: String,
    pub account_id: String,
    pub account_address: String,
    pub source_address: String,
    pub source_type: SourceType,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_account_id: Option<String>,
    pub currency_symbol: String,
    pub amount: String,
    pub destination_chain: Chain,
    pub transaction_hash: String,
    pub status: DepositStatus,
    /// When the deposit became `CONFIRMED`. The key is always present (the
    /// resource requires it) and `null` while the deposit is `PENDING` and
    /// for a `FAILED` one, which never was confirmed.
    #[serde(serialize_with = "rfc3339_opt")]
    #[schema(value_type = Option<String>, format = DateTime, required = true)]
    pub confirmed_at: Option<DateTime<Utc>>,
    /// The timestamp of the block that holds the transaction, with its
    /// milliseconds where the node serves them (Base's `timestampMs`).
    #[serde(serialize_with = "rfc3339")]
    pub created_at: DateTime<Utc>,
}

/// RFC 3339 in UTC with a `Z`, fractional seconds only when present.
pub fn rfc3339<S: Serializer>(time: &DateTime<Utc>, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&format_time(time))
}

/// The API's time format: RFC 3339 in UTC with a `Z`.
pub fn format_time(time: &DateTime<Utc>) -> String {
    time.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

pub fn rfc3339_opt<S: Serializer>(time: &Option<DateTime<Utc>>, serializer: S) -> Result<S::Ok, S::Error> {
    match time {
        Some(time) => rfc3339(time, serializer),
        None => serializer.serialize_none(),
    }
}

impl Position {
    /// The position as the natural key stores it. A token transfer's and an
    /// SPL balance rise's readable form is a hundred-odd characters, so it is
    /// stored as its kind and a digest of that form ([`compact_key`]): the
    /// unique index holds a short entry per deposit. The others are short
    /// already and stored as they read.
    pub fn key(&self) -> String {
        match self {
            Position::Log(_) | Position::Token { .. } => compact_key(&self.to_string()),
            _ => self.to_string(),
        }
    }
}

/// The bytes of SHA-256 a compact key keeps: 128 bits.
const COMPACT_DIGEST_BYTES: usize = 16;

/// The stored key of a readable position (`log:USDC:0x…:0x…:8000000000:0`,
/// `spl:<owner>:<mint>`): its kind, a colon and the URL-safe base64 of the
/// first 128 bits of the SHA-256 of the whole readable form, 26 characters
/// in all (`log:Qm9…`). The digest has no colon, so a readable form (which
/// has at least two) is never mistaken for a stored key, and a position
/// without a second colon (`native`, a key already compact) is returned as
/// it is. Two transfers of one transaction share a key only if SHA-256
/// collides on 128 bits, which takes about 2^64 attempts to force.
pub fn compact_key(readable: &str) -> String {
    use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
    use sha2::{Digest, Sha256};
    let Some((kind, rest)) = readable.split_once(':') else { return readable.to_string() };
    if !rest.contains(':') {
        return readable.to_string();
    }
    let digest = Sha256::digest(readable.as_bytes());
    format!("{kind}:{}", URL_SAFE_NO_PAD.encode(&digest[..COMPACT_DIGEST_BYTES]))
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Position::Native => f.write_str("native"),
            // The same text migration 0008 computes for rows stored before.
            Position::Log(t) => write!(f, "log:{}:{}:{}:{}:{}", t.symbol, t.from, t.to, t.raw, t.occurrence),
            Position::Trace(path) => write!(f, "trace:{path}"),
            Position::Lamports { wallet } => write!(f, "sol:{wallet}"),
            Position::Token { owner, mint } => write!(f, "spl:{owner}:{mint}"),
        }
    }
}

impl DepositStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            DepositStatus::Pending => "PENDING",
            DepositStatus::Confirmed => "CONFIRMED",
            DepositStatus::Failed => "FAILED",
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("unknown deposit status {0:?}")]
pub struct UnknownStatus(String);

impl FromStr for DepositStatus {
    type Err = UnknownStatus;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "PENDING" => Ok(Self::Pending),
            "CONFIRMED" => Ok(Self::Confirmed),
            "FAILED" => Ok(Self::Failed),
            _ => Err(UnknownStatus(s.into())),
        }
    }
}

impl OwnKind {
    pub fn as_str(self) -> &'static str {
        match self {
            OwnKind::TopUp => "TOP_UP",
            OwnKind::Cancel => "CANCEL",
            OwnKind::NonceFiller => "NONCE_FILLER",
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("unknown kind of own transaction {0:?}")]
pub struct UnknownKind(String);

impl FromStr for OwnKind {
    type Err = UnknownKind;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "TOP_UP" => Ok(Self::TopUp),
            "CANCEL" => Ok(Self::Cancel),
            "NONCE_FILLER" => Ok(Self::NonceFiller),
            _ => Err(UnknownKind(s.into())),
        }
    }
}

impl SourceType {
    pub fn as_str(self) -> &'static str {
        match self {
            SourceType::OnChain => "ON_CHAIN",
            SourceType::Account => "ACCOUNT",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serializes_exactly_the_resource_fields() {
        let deposit = Deposit {
            id: "d1".into(),
            dedup_key: "e1".into(),
            account_id: "acc".into(),
            account_address: "0xA".into(),
            source_address: "0xB".into(),
            source_type: SourceType::OnChain,
            source_account_id: None,
            currency_symbol: "USDC".into(),
            amount: "1.5".into(),
            destination_chain: Chain::BaseSepolia,
            transaction_hash: "0xabc".into(),
            status: DepositStatus::Pending,
            confirmed_at: None,
            created_at: DateTime::from_timestamp(1_700_000_000, 0).unwrap(),
        };
        let json = serde_json::to_value(&deposit).unwrap();
        let mut keys: Vec<_> = json.as_object().unwrap().keys().cloned().collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "account_address",
                "account_id",
                "amount",
                "confirmed_at",
                "created_at",
                "currency_symbol",
                "dedup_key",
                "destination_chain",
                "id",
                "source_address",
                "source_type",
                "status",
                "transaction_hash"
            ]
        );
        assert_eq!(json["confirmed_at"], serde_json::Value::Null, "present, null until confirmed");
        assert_eq!(json["created_at"], "2023-11-14T22:13:20Z");
        assert_eq!(json["destination_chain"], "BASE_SEPOLIA");
        assert_eq!(json["source_type"], "ON_CHAIN");

        let confirmed = Deposit {
            status: DepositStatus::Confirmed,
            confirmed_at: DateTime::from_timestamp(1_700_000_024, 500_000_000),
            ..deposit.clone()
        };
        assert_eq!(serde_json::to_value(&confirmed).unwrap()["confirmed_at"], "2023-11-14T22:13:44.500Z");

        let internal =
            Deposit { source_type: SourceType::Account, source_account_id: Some("acc2".into()), ..deposit };
        let json = serde_json::to_value(&internal).unwrap();
        assert_eq!(json["source_account_id"], "acc2");
        assert_eq!(json["source_type"], "ACCOUNT");
    }

    fn native(tx: &str, from: &str) -> Detected {
        Detected {
            chain: Chain::BaseSepolia,
            tx_hash: tx.into(),
            position: Position::Native,
            block_number: 7,
            block_hash: "0xb7".into(),
            block_time_ms: 1_700_000_000_000,
            account_id: "acc".into(),
            account_address: "0xA".into(),
            source_address: from.into(),
            source_account_id: None,
            currency_symbol: "ETH".into(),
            amount: Amount::from_raw(alloy::primitives::U256::from(5u8), 18),
        }
    }

    #[test]
    fn own_transactions_are_told_by_hash_never_by_sender() {
        let sponsor = "0x5050";
        let top_up = native("0x01", sponsor);
        // From the sponsor too, but not a transaction the sender recorded.
        let refund = native("0x02", sponsor);
        let filler = native("0x03", "0xA");
        let customer = native("0x04", "0xC");
        // A hash that differs only in case is another transaction (Solana
        // signatures are case-sensitive; EVM hashes are stored lowercase).
        let shouting = native("0X01", sponsor);
        let detected = [top_up.clone(), refund.clone(), filler.clone(), customer.clone(), shouting.clone()];
        let own = HashMap::from([
            ("0x01".to_string(), OwnKind::TopUp),
            ("0x03".to_string(), OwnKind::NonceFiller),
            ("0x09".to_string(), OwnKind::Cancel),
        ]);
        let split = split_own(&detected, &own);
        assert_eq!(split.own, [(&top_up, OwnKind::TopUp), (&filler, OwnKind::NonceFiller)]);
        assert_eq!(split.deposits, [&refund, &customer, &shouting]);
        // No recorded hash: all are deposits.
        assert_eq!(split_own(&detected, &HashMap::new()).deposits.len(), detected.len());
        // The same input gives the same answer.
        assert_eq!(split_own(&detected, &own), split);
    }
}
