//! The set of watched addresses of one chain, in the form its decoder matches
//! fastest (20-byte EVM addresses, 32-byte Solana keys).

use std::{collections::HashMap, hash::Hash, sync::Arc};

/// Watched address → the account it belongs to, plus each address's
/// canonical text. Account ids are shared, so a million addresses of a few
/// accounts cost little more than the keys.
#[derive(Debug, Clone, Default)]
pub struct WatchSet<K: Eq + Hash> {
    accounts: HashMap<K, Arc<str>>,
}

impl<K: Eq + Hash> WatchSet<K> {
    /// Builds the set from `(address, account_id)` pairs, skipping addresses
    /// `parse` refuses (they were validated on the way in).
    pub fn build(pairs: Vec<(String, String)>, parse: impl Fn(&str) -> Option<K>) -> Self {
        let mut ids: HashMap<String, Arc<str>> = HashMap::new();
        let mut accounts = HashMap::with_capacity(pairs.len());
        for (address, account_id) in pairs {
            let Some(key) = parse(&address) else {
                tracing::error!(
                    address,
                    account_id,
                    "stored address does not parse; it is not watched"
                );
                continue;
            };
            let id = ids
                .entry(account_id)
                .or_insert_with_key(|k| Arc::from(k.as_str()))
                .clone();
            accounts.insert(key, id);
        }
        Self { accounts }
    }

    pub fn account_of(&self, address: &K) -> Option<&Arc<str>> {
        self.accounts.get(address)
    }

    pub fn len(&self) -> usize {
        self.accounts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.accounts.is_empty()
    }
}
