//! An audit entry's machine-readable part: a model type, which the store
//! reads back and the principals' checks hold rows against.

/// An entry's machine-readable part, written as canonical JSON (keys in
/// this order, absent ones left out): what `audit verify` holds the
/// principals' rows against. Never personal data.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Detail {
    /// An operator's roles after the entry, sorted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roles: Option<Vec<String>>,
    /// The operator key the entry made or revoked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_id: Option<String>,
    /// An adopted row's state: an operator enabled, a key not revoked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live: Option<bool>,
    /// An adopted API key's pairing with a public key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paired: Option<bool>,
    /// The pepper keys are hashed under (its id, never itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pepper_id: Option<String>,
    /// The SHA-256 of the public key (PEM) an API key is paired with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_key_sha256: Option<String>,
    /// When the operator key the entry made (or bounded) expires, in
    /// microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
    /// An enrol link the entry made: the hash the store keeps of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_sha256: Option<String>,
    /// A proposed change of operators: the digest of what it proposes
    /// (see [`crate::operators::resource::Change::digest`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proposal_sha256: Option<String>,
    /// An organization's contact address as the entry set it: the SHA-256
    /// of its id and the address (see
    /// [`crate::operators::tenants::contact_digest`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contact_sha256: Option<String>,
    /// A reconciliation repair as it was asked for: the digest of its
    /// chain, scope, credits and worth (see `reconcile::repairs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repair_sha256: Option<String>,
    /// The log's authentication: the head it found (`seq`, hash).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_seq: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_hash: Option<String>,
    /// The log's authentication: the signed checkpoint it held the log
    /// against, by `seq`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_seq: Option<i64>,
    /// The log's authentication: the principals in force, a line each
    /// (see [`crate::audit::authenticate`]), and their SHA-256.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principals: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principals_sha256: Option<String>,
    /// A grant applied by an approved change of operators: the change's
    /// id, whose `operator_change.approved` entry comes before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change_id: Option<String>,
    /// An acknowledgement: the hash of the entry it acknowledges, as the
    /// admin acknowledged it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acknowledged_hash: Option<String>,
    /// A restore's acknowledgement: the lost checkpoint's hash and time
    /// (its `seq` is [`Detail::checkpoint_seq`]), the entries lost
    /// (`lost_from..=lost_to`), and the chains that wait for `transfers
    /// recover`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_at: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_from: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_to: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chains: Option<Vec<String>>,
}

impl Detail {
    /// An operator's roles.
    pub fn roles(roles: &[crate::operators::Role]) -> Self {
        Self::roles_of(&roles.iter().map(|r| r.as_str()).collect::<Vec<_>>())
    }

    /// Roles by name, sorted.
    pub fn roles_of(names: &[&str]) -> Self {
        let mut roles: Vec<String> = names.iter().map(|r| r.to_string()).collect();
        roles.sort();
        roles.dedup();
        Detail { roles: Some(roles), ..Detail::default() }
    }

    /// An operator key.
    pub fn key(id: &str) -> Self {
        Detail { key_id: Some(id.to_string()), ..Detail::default() }
    }

    /// The text stored: JSON without white space.
    pub fn text(&self) -> String {
        serde_json::to_string(self).expect("a detail serializes")
    }

    /// A stored detail read back; `None` for text this release does not
    /// read.
    pub fn parse(text: &str) -> Option<Self> {
        serde_json::from_str(text).ok()
    }
}
