//! Ids that survive any restore or re-index, pure. A deposit's `id` and
//! `dedup_key` are derived from its natural key (chain, transaction,
//! stored position), and each of its events' ids from its `dedup_key`,
//! the status it announces and how many events of that status the deposit
//! had before: a deposit found again (after a restore from a backup, a
//! re-index, a reorg that re-includes its transaction) has the ids it had,
//! and so does its `CONFIRMED` event. Each id is a UUIDv8 (RFC 9562) whose
//! 122 free bits are the first 16 bytes of SHA-256 over a label and the
//! parts, each preceded by a NUL byte (the version and variant bits
//! overwrite 6 of them). Deposits stored before kept their random UUIDv7
//! ids (the version nibble, `7` or `8`, tells them apart).

use sha2::{Digest, Sha256};

use super::resource::DepositStatus;
use crate::chain::Chain;

/// The label of a deposit's `id`.
pub const DEPOSIT: &str = "custody-indexer deposit v1";
/// The label of a deposit's `dedup_key` (its first event's id).
pub const DEDUP: &str = "custody-indexer dedup v1";
/// The label of a deposit's later events' ids.
pub const EVENT: &str = "custody-indexer deposit event v1";

/// The UUIDv8 of `label` and `parts`: SHA-256(label ‖ 0x00 ‖ part ‖ 0x00 ‖
/// part …), its first 16 bytes with the version and variant set.
pub fn derived(label: &str, parts: &[&str]) -> uuid::Uuid {
    let mut hash = Sha256::new();
    hash.update(label.as_bytes());
    for part in parts {
        hash.update([0u8]);
        hash.update(part.as_bytes());
    }
    let digest = hash.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_custom_bytes(bytes).into_uuid()
}

/// A deposit's natural key: its chain, its transaction's hash (lowercased)
/// and its position as the store keeps it ([`super::resource::Position::key`]).
fn natural<'a>(chain: Chain, tx_hash: &'a str, position: &'a str) -> [String; 3] {
    [chain.as_str().to_string(), tx_hash.to_lowercase(), position.to_string()]
}

/// The `id` of the deposit at `position` of transaction `tx_hash` on `chain`.
pub fn deposit_id(chain: Chain, tx_hash: &str, position: &str) -> String {
    let parts = natural(chain, tx_hash, position);
    derived(DEPOSIT, &parts.each_ref().map(String::as_str)).to_string()
}

/// The `dedup_key` of the same deposit: its first event's id.
pub fn dedup_key(chain: Chain, tx_hash: &str, position: &str) -> String {
    let parts = natural(chain, tx_hash, position);
    derived(DEDUP, &parts.each_ref().map(String::as_str)).to_string()
}

/// The id of a deposit's event announcing `status` after `earlier` events
/// of that status (0 for the first), other than its first event (whose id
/// is the `dedup_key`).
pub fn event_id(dedup_key: &str, status: DepositStatus, earlier: u32) -> String {
    derived(EVENT, &[dedup_key, status.as_str(), &earlier.to_string()]).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TX: &str = "0x5C504ED432CB51138BCF09AA5E8A410DD4A1E204EF84BFED1BE16DFBA1B22060";

    #[test]
    fn ids_are_version_8_and_depend_on_every_part_of_the_natural_key() {
        let id = deposit_id(Chain::EthereumMainnet, TX, "native");
        let parsed = uuid::Uuid::parse_str(&id).unwrap();
        assert_eq!(parsed.get_version_num(), 8, "{id}");
        assert_eq!(parsed.get_variant(), uuid::Variant::RFC4122, "{id}");
        // A transaction hash in any case is one transaction.
        assert_eq!(id, deposit_id(Chain::EthereumMainnet, &TX.to_lowercase(), "native"));
        let others = [
            deposit_id(Chain::BaseMainnet, TX, "native"),
            deposit_id(Chain::EthereumMainnet, &TX.replace("5C5", "5C6"), "native"),
            deposit_id(Chain::EthereumMainnet, TX, "log:69j-dLdwv7geSCL3jn56-w"),
            dedup_key(Chain::EthereumMainnet, TX, "native"),
        ];
        for other in others {
            assert_ne!(id, other);
        }
    }

    #[test]
    fn parts_are_separated_so_that_moving_a_boundary_is_another_id() {
        assert_ne!(derived(DEPOSIT, &["ab", "c"]), derived(DEPOSIT, &["a", "bc"]));
        assert_ne!(derived(DEPOSIT, &["a"]), derived(DEDUP, &["a"]));
    }

    #[test]
    fn an_events_id_depends_on_its_status_and_how_many_came_before() {
        let key = dedup_key(Chain::EthereumMainnet, TX, "native");
        let confirmed = event_id(&key, DepositStatus::Confirmed, 0);
        assert_eq!(confirmed, event_id(&key, DepositStatus::Confirmed, 0), "the same after any restore");
        assert_ne!(confirmed, event_id(&key, DepositStatus::Failed, 0));
        assert_ne!(event_id(&key, DepositStatus::Pending, 1), event_id(&key, DepositStatus::Pending, 2));
        assert_ne!(confirmed, key);
    }

    /// The worked example of docs/deposits.md, recomputed by anyone from
    /// the bytes it names.
    #[test]
    fn the_documented_example_is_what_the_service_computes() {
        assert_eq!(deposit_id(Chain::EthereumMainnet, TX, "native"), EXAMPLE_ID);
        assert_eq!(dedup_key(Chain::EthereumMainnet, TX, "native"), EXAMPLE_DEDUP);
        let tx = "0x5c504ed432cb51138bcf09aa5e8a410dd4a1e204ef84bfed1be16dfba1b22060";
        let bytes = ["custody-indexer deposit v1", "ETHEREUM_MAINNET", tx, "native"].join("\0");
        let hash = Sha256::digest(bytes.as_bytes());
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(&hash[..16]);
        bytes[6] = (bytes[6] & 0x0f) | 0x80;
        bytes[8] = (bytes[8] & 0x3f) | 0x80;
        assert_eq!(uuid::Uuid::from_bytes(bytes).to_string(), EXAMPLE_ID, "by hand");
        let confirmed = event_id(EXAMPLE_DEDUP, DepositStatus::Confirmed, 0);
        assert_eq!(confirmed, "7fc00be2-2a29-84da-8948-6f37a3b18afc");
    }

    const EXAMPLE_ID: &str = "bfc39027-9d86-83b7-b441-f0137a4bc85f";
    const EXAMPLE_DEDUP: &str = "153d6618-37a8-89f4-8642-8e12ae1a749a";
}
