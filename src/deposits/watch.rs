//! The set of watched addresses of one chain, in the form its decoder matches
//! fastest (20-byte EVM addresses, 32-byte Solana keys).

use std::{borrow::Borrow, collections::HashMap, hash::Hash, sync::Arc};

/// Watched address → the account it belongs to. Every transaction and log
/// of a scanned block is looked up here, so the map hashes with foldhash
/// (randomly seeded per process) rather than SipHash.
#[derive(Debug, Clone, Default)]
pub struct WatchSet<K: Eq + Hash> {
    accounts: HashMap<K, Arc<str>, foldhash::fast::RandomState>,
}

impl<K: Eq + Hash> WatchSet<K> {
    /// Builds the set from `(address, account_id)` pairs.
    pub fn build(pairs: Vec<(String, String)>, parse: impl Fn(&str) -> Option<K>) -> Self {
        let mut set = Self { accounts: HashMap::with_capacity_and_hasher(pairs.len(), Default::default()) };
        for (address, account_id) in pairs {
            set.insert(&address, &account_id, &parse);
        }
        set
    }

    /// Adds an address; one `parse` refuses was validated on the way in, so it
    /// is logged and skipped rather than stopping the watcher.
    pub fn insert(&mut self, address: &str, account_id: &str, parse: impl Fn(&str) -> Option<K>) {
        match parse(address) {
            Some(key) => {
                self.accounts.insert(key, Arc::from(account_id));
            }
            None => tracing::error!(address, account_id, "stored address does not parse; it is not watched"),
        }
    }

    pub fn account_of<Q>(&self, address: &Q) -> Option<&Arc<str>>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.accounts.get(address)
    }

    pub fn len(&self) -> usize {
        self.accounts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.accounts.is_empty()
    }
}
