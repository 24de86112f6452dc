//! The audit log's hash chain, pure. Each entry's `hash` is the lowercase
//! hex SHA-256 of its canonical encoding: the JSON array
//! `[1, seq, at, actor, actor_name, action, target_kind, target_id,
//! organization_id, reason, request_id, prev_hash]` as `serde_json` writes
//! it (no white space; strings escaped as JSON does; an absent value
//! `null`; `1` the encoding's version), where `reason` is the text as
//! written (sealed when the store seals personal data) and `prev_hash` the
//! previous entry's `hash` (64 zeros before the first). An entry with a
//! `detail` (the machine-readable part: an operator's roles, a key's id, as
//! JSON text) is encoded as version 2: `[2, seq, at, actor, actor_name,
//! action, target_kind, target_id, organization_id, reason, request_id,
//! detail, prev_hash]`, `detail` the text as stored. An entry edited,
//! deleted, inserted or moved changes a hash or breaks a link: [`verify`]
//! names the first entry that does not match.

use serde::Serialize;
use sha2::{Digest, Sha256};

/// The `prev_hash` of the first entry.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// An entry as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Entry {
    pub seq: i64,
    /// Microseconds since the epoch, by the store's clock.
    pub at: i64,
    pub actor: String,
    pub actor_name: Option<String>,
    pub action: String,
    pub target_kind: String,
    pub target_id: String,
    pub organization_id: Option<String>,
    pub reason: Option<String>,
    pub request_id: Option<String>,
    /// The machine-readable part, as JSON text (see [`super::Detail`]); never
    /// personal data.
    pub detail: Option<String>,
    pub prev_hash: String,
    pub hash: String,
    /// The entry's MAC under the pepper's audit key (see
    /// [`crate::store::keyring::audit_mac`]): written by the entry's own
    /// insert by a process with a pepper, never part of the hash, never
    /// added later.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
}

impl Entry {
    /// The hash this entry's fields give.
    pub fn digest(&self) -> String {
        use serde_json::json;
        let version = if self.detail.is_some() { 2 } else { 1 };
        let mut fields = vec![
            json!(version),
            json!(self.seq),
            json!(self.at),
            json!(self.actor),
            json!(self.actor_name),
            json!(self.action),
            json!(self.target_kind),
            json!(self.target_id),
            json!(self.organization_id),
            json!(self.reason),
            json!(self.request_id),
        ];
        fields.extend(self.detail.as_ref().map(|detail| json!(detail)));
        fields.push(json!(self.prev_hash));
        let canonical = serde_json::Value::Array(fields);
        let bytes = serde_json::to_vec(&canonical).expect("a JSON value serializes");
        sha256_hex(&bytes)
    }
}

/// The lower-case hex SHA-256 of `bytes`: how the log writes a digest.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Where the chain breaks: the first entry that does not match, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("audit entry {seq}: {why}")]
pub struct Broken {
    pub seq: i64,
    pub why: &'static str,
}

/// Checks `entries` (in `seq` order, from the first) against each other
/// and against the head the store keeps (`head`: the last `seq` and its
/// hash), so that a deleted last entry is found too.
/// Answers the number of entries checked.
pub fn verify<'a>(
    entries: impl IntoIterator<Item = &'a Entry>,
    head: Option<(i64, &str)>,
) -> Result<i64, Broken> {
    let (mut seq, mut prev) = (0i64, GENESIS.to_string());
    for entry in entries {
        let expected = seq + 1;
        if entry.seq != expected {
            return Err(Broken { seq: expected, why: "missing: the sequence skips it" });
        }
        if entry.prev_hash != prev {
            return Err(Broken { seq: entry.seq, why: "its link does not name the entry before it" });
        }
        if entry.digest() != entry.hash {
            return Err(Broken { seq: entry.seq, why: "its hash does not match what it holds" });
        }
        (seq, prev) = (entry.seq, entry.hash.clone());
    }
    match head {
        Some((head_seq, _)) if head_seq < seq => {
            Err(Broken { seq: head_seq + 1, why: "past the head the store keeps: written outside the log" })
        }
        Some((head_seq, _)) if head_seq > seq => {
            Err(Broken { seq: seq + 1, why: "missing: the log ends before the head the store keeps" })
        }
        Some((head_seq, head_hash)) if head_seq == seq && head_hash != prev => {
            Err(Broken { seq, why: "its hash is not the head the store keeps" })
        }
        _ => Ok(seq),
    }
}

/// The whole log of `store` checked: the entries first, then the head
/// (every entry committed before the head was read is at or below it, so
/// one above it was written outside the log); entries appended meanwhile
/// are read up to the head. The count of entries and the head's hash, or
/// where the chain breaks.
pub async fn verify_store(
    store: &crate::store::Store,
) -> Result<Result<(i64, String), Broken>, crate::store::StoreError> {
    let (entries, (head_seq, head_hash)) = read_log(store).await?;
    Ok(verify(&entries, Some((head_seq, &head_hash))).map(|count| (count, head_hash)))
}

/// The whole log of `store` and its head, read as [`verify_store`] reads
/// them: the entries first, then the head, then the entries appended
/// meanwhile up to it.
pub async fn read_log(
    store: &crate::store::Store,
) -> Result<(Vec<Entry>, (i64, String)), crate::store::StoreError> {
    let mut entries = read_entries(store, 0, i64::MAX).await?;
    let (head_seq, head_hash) = store.audit_head().await?;
    let last = entries.last().map_or(0, |e| e.seq);
    if head_seq > last {
        entries.extend(read_entries(store, last, head_seq).await?);
    }
    Ok((entries, (head_seq, head_hash)))
}

/// The entries after `after` up to `upto`, oldest first.
async fn read_entries(
    store: &crate::store::Store,
    mut after: i64,
    upto: i64,
) -> Result<Vec<Entry>, crate::store::StoreError> {
    const PAGE: i64 = 1000;
    let mut entries = Vec::new();
    loop {
        let page = store.audit_entries(after, None, PAGE).await?;
        let Some(last) = page.last() else { break };
        after = last.seq;
        entries.extend(page.into_iter().filter(|e| e.seq <= upto));
        if after >= upto {
            break;
        }
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(n: i64) -> Vec<Entry> {
        let mut prev = GENESIS.to_string();
        (1..=n)
            .map(|seq| {
                let mut entry = Entry {
                    seq,
                    at: 1_790_000_000_000_000 + seq,
                    actor: format!("operator:op{seq}"),
                    actor_name: Some("Ann".into()),
                    action: "wire.approved".into(),
                    target_kind: "mint".into(),
                    target_id: format!("mint-{seq}"),
                    organization_id: Some("org".into()),
                    reason: (seq % 2 == 0).then(|| "checked the statement".into()),
                    request_id: None,
                    detail: (seq == 3).then(|| r#"{"roles":["admin"]}"#.into()),
                    prev_hash: prev.clone(),
                    hash: String::new(),
                    mac: None,
                };
                entry.hash = entry.digest();
                prev = entry.hash.clone();
                entry
            })
            .collect()
    }

    fn head(entries: &[Entry]) -> Option<(i64, &str)> {
        entries.last().map(|e| (e.seq, e.hash.as_str()))
    }

    #[test]
    fn an_intact_chain_verifies() {
        let entries = chain(5);
        assert_eq!(verify(&entries, head(&entries)), Ok(5));
        assert_eq!(verify(&[], Some((0, GENESIS))), Ok(0));
    }

    #[test]
    fn the_encoding_is_fixed() {
        // A change of the canonical encoding breaks every stored chain: this
        // digest is the documented encoding's.
        let entry = &chain(1)[0];
        let text = r#"[1,1,1790000000000001,"operator:op1","Ann","wire.approved","mint","mint-1","org",null,null,"0000000000000000000000000000000000000000000000000000000000000000"]"#;
        let expected: String = Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(entry.hash, expected);
        // With a detail, version 2, the detail before the link.
        let mut entry = entry.clone();
        entry.detail = Some(r#"{"key_id":"k1"}"#.into());
        let text = r#"[2,1,1790000000000001,"operator:op1","Ann","wire.approved","mint","mint-1","org",null,null,"{\"key_id\":\"k1\"}","0000000000000000000000000000000000000000000000000000000000000000"]"#;
        let expected: String = Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(entry.digest(), expected);
    }

    #[test]
    fn every_tampering_names_the_first_entry_that_does_not_match() {
        let entries = chain(5);
        type Tamper = Box<dyn Fn(&mut Vec<Entry>)>;
        let cases: Vec<(&str, Tamper, Broken)> = vec![
            (
                "edited reason",
                Box::new(|e| e[2].reason = Some("nothing".into())),
                Broken { seq: 3, why: "its hash does not match what it holds" },
            ),
            (
                "edited detail",
                Box::new(|e| e[2].detail = Some(r#"{"roles":["admin","treasury"]}"#.into())),
                Broken { seq: 3, why: "its hash does not match what it holds" },
            ),
            (
                "detail removed",
                Box::new(|e| e[2].detail = None),
                Broken { seq: 3, why: "its hash does not match what it holds" },
            ),
            (
                "edited actor",
                Box::new(|e| e[1].actor = "operator:other".into()),
                Broken { seq: 2, why: "its hash does not match what it holds" },
            ),
            (
                "deleted",
                Box::new(|e| {
                    e.remove(3);
                }),
                Broken { seq: 4, why: "missing: the sequence skips it" },
            ),
            (
                "deleted last",
                Box::new(|e| {
                    e.pop();
                }),
                Broken { seq: 5, why: "missing: the log ends before the head the store keeps" },
            ),
            (
                "rehashed after an edit",
                Box::new(|e| {
                    e[1].action = "wire.refused".into();
                    e[1].hash = e[1].digest();
                }),
                Broken { seq: 3, why: "its link does not name the entry before it" },
            ),
            (
                "reordered",
                Box::new(|e| {
                    e.swap(1, 2);
                    let (a, b) = (e[1].seq, e[2].seq);
                    e[1].seq = b;
                    e[2].seq = a;
                }),
                Broken { seq: 2, why: "its link does not name the entry before it" },
            ),
        ];
        let full = head(&entries).map(|(s, h)| (s, h.to_string()));
        for (name, tamper, broken) in cases {
            let mut tampered = entries.clone();
            tamper(&mut tampered);
            let head = full.as_ref().map(|(s, h)| (*s, h.as_str()));
            assert_eq!(verify(&tampered, head), Err(broken), "{name}");
        }
    }

    #[test]
    fn an_entry_past_the_head_was_written_outside_the_log() {
        // Rows inserted with a valid link and hash, the head left alone.
        let entries = chain(6);
        let head = Some((5, entries[4].hash.as_str()));
        assert_eq!(
            verify(&entries, head),
            Err(Broken { seq: 6, why: "past the head the store keeps: written outside the log" })
        );
    }
}
