//! Metrics in the Prometheus text format. Watchers record through the
//! `metrics` facade as they work; what lives in the store (deposits by
//! status, each chain's last reported state, reorgs) is read at every scrape,
//! so a `serve` process that indexes nothing reports it too.

use std::sync::OnceLock;

use metrics::{Unit, describe_counter, describe_gauge, gauge};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

use crate::{config::Chains, deposits::resource::DepositStatus, store::Store, transfers::TransferStatus};

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the process's Prometheus recorder on first use and returns its
/// handle. Metrics recorded before the first call are lost, so `run` and
/// `serve` call this before anything starts.
pub fn prometheus() -> PrometheusHandle {
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new().build_recorder();
            let handle = recorder.handle();
            // Another recorder may be installed when embedded; the handle then renders only ours.
            let _ = metrics::set_global_recorder(recorder);
            describe();
            handle
        })
        .clone()
}

fn describe() {
    describe_gauge!(
        "custody_indexer_head_block",
        "The chain head the watcher last saw (Solana: confirmed slot)"
    );
    describe_gauge!("custody_indexer_indexed_block", "The highest block (slot) indexed");
    describe_gauge!("custody_indexer_lag_blocks", "Blocks (slots) between the head and the indexed height");
    describe_gauge!(
        "custody_indexer_last_success_timestamp_seconds",
        Unit::Seconds,
        "When a watcher step (and its RPC calls) last succeeded"
    );
    describe_gauge!(
        "custody_indexer_chain_healthy",
        "1 when the chain is within its lag and staleness limits"
    );
    describe_gauge!(
        "custody_indexer_chain_stopped",
        "1 when the chain's watcher is stopped until `chains resume`"
    );
    describe_gauge!("custody_indexer_deposits", "Deposits in the store by chain and status");
    describe_gauge!("custody_indexer_reorgs_recorded", "Reorgs recorded in the store by chain");
    describe_gauge!("custody_indexer_transfers", "Outbound transfers in the store by chain and status");
    describe_gauge!(
        "custody_indexer_issuance_unbalanced_mints",
        "Mints whose dollars are not what they minted, owe back or have on their way, by chain and stablecoin"
    );
    describe_counter!(
        "custody_indexer_rpc_errors_total",
        "Failed watcher steps by chain and kind of failure"
    );
    describe_gauge!(
        "custody_indexer_webhook_backlog",
        "Webhook deliveries not yet done (pending or retrying)"
    );
    describe_counter!("custody_indexer_webhook_deliveries_total", "Delivery attempts by outcome");
    describe_counter!("custody_indexer_reorgs_total", "Reorgs this process detected");
    describe_counter!(
        "custody_indexer_bad_signatures_total",
        "Signatures the signer answered that did not verify for their key, never sent"
    );
    describe_counter!(
        "custody_indexer_signer_refusals_total",
        "Signatures refused because their key reached CUSTODY_INDEXER_SIGNER_MAX_PER_MINUTE"
    );
    describe_gauge!(
        "custody_indexer_local_keys",
        "1 when a production service signs with keys its host can read (a mnemonic, a software token)"
    );
    describe_counter!("custody_indexer_deep_reorgs_total", "Reorgs below a confirmed deposit");
    describe_gauge!(
        "custody_indexer_audit_checkpoint_age_seconds",
        "Age of the newest audit checkpoint whose signature verifies, as this instance holding the key knows it"
    );
}

/// Refreshes the store-backed gauges and renders every metric.
pub async fn render(store: &Store, chains: &Chains, required: &[crate::chain::Chain]) -> String {
    let handle = prometheus();
    let report = crate::deposits::health::check(store, chains, required).await;
    for chain in &report.chains {
        let label = chain.chain.as_str();
        if let Some(head) = chain.head {
            gauge!("custody_indexer_head_block", "chain" => label).set(head as f64);
        }
        if let Some(indexed) = chain.indexed {
            gauge!("custody_indexer_indexed_block", "chain" => label).set(indexed as f64);
        }
        if let Some(lag) = chain.lag {
            gauge!("custody_indexer_lag_blocks", "chain" => label).set(lag as f64);
        }
        if let Some(at) = chain.last_success_at {
            gauge!("custody_indexer_last_success_timestamp_seconds", "chain" => label)
                .set(at.timestamp() as f64);
        }
        gauge!("custody_indexer_chain_healthy", "chain" => label).set(if chain.healthy { 1.0 } else { 0.0 });
        let stopped = if chain.stop.is_some() { 1.0 } else { 0.0 };
        gauge!("custody_indexer_chain_stopped", "chain" => label).set(stopped);
    }
    // Conditions in force by kind (an unfunded sponsor, failing webhooks),
    // 0 for a kind that has none any more: an alert needs no log search.
    let kinds = [
        crate::transfers::sponsor::KIND,
        crate::events::delivery::FAILING,
        crate::store::SIGNER_UNREACHABLE,
        crate::operators::suspension::CONDITION,
    ];
    for kind in kinds {
        let n = report.conditions.iter().filter(|c| c.kind == kind).count();
        gauge!("custody_indexer_conditions", "kind" => kind).set(n as f64);
    }
    let local = report.conditions.iter().any(|c| c.kind == crate::keys::rules::LOCAL_KEYS);
    gauge!("custody_indexer_local_keys").set(if local { 1.0 } else { 0.0 });
    if let Ok(counts) = store.deposit_counts().await {
        for count in &counts {
            gauge!("custody_indexer_deposits", "chain" => count.chain.as_str(), "status" => count.status.as_str())
                .set(count.count as f64);
        }
        // A status that no deposit has any more reads 0 rather than its last count.
        let active: std::collections::BTreeSet<_> =
            counts.iter().map(|c| c.chain).chain(report.chains.iter().map(|c| c.chain)).collect();
        for chain in active {
            for status in [DepositStatus::Pending, DepositStatus::Confirmed, DepositStatus::Failed] {
                if !counts.iter().any(|c| c.chain == chain && c.status == status) {
                    gauge!("custody_indexer_deposits", "chain" => chain.as_str(), "status" => status.as_str())
                        .set(0.0);
                }
            }
        }
    }
    if let Ok(counts) = store.transfer_counts().await {
        let chains: std::collections::BTreeSet<_> = counts.iter().map(|(chain, ..)| *chain).collect();
        for chain in chains {
            for status in TransferStatus::ALL {
                let count =
                    counts.iter().find(|(c, s, _)| *c == chain && *s == status).map_or(0, |(.., n)| *n);
                gauge!("custody_indexer_transfers", "chain" => chain.as_str(), "status" => status.as_str())
                    .set(count as f64);
            }
        }
    }
    issuance_books(store, chains).await;
    if let Ok(backlog) = store.delivery_backlog().await {
        gauge!("custody_indexer_webhook_backlog").set(backlog as f64);
    }
    if let Ok(reorgs) = store.reorg_counts().await {
        for (chain, count) in reorgs {
            gauge!("custody_indexer_reorgs_recorded", "chain" => chain.as_str()).set(count as f64);
        }
    }
    handle.render()
}

/// Mints whose dollars are not what they minted, owe back or have on their
/// way, per chain and issued stablecoin (`issuance reconcile` names them
/// and also checks the supply on chain): 0 when the books balance.
async fn issuance_books(store: &Store, chains: &Chains) {
    let Ok(rows) = store.mint_books(None).await else { return };
    for config in chains.iter() {
        for asset in config.assets.iter().filter(|a| a.issued) {
            let n = rows
                .iter()
                .filter(|r| {
                    r.chain == config.chain && r.symbol == asset.symbol && !r.balances(asset.decimals)
                })
                .count();
            gauge!("custody_indexer_issuance_unbalanced_mints", "chain" => config.chain.as_str(), "stablecoin" => asset.symbol.clone())
                .set(n as f64);
        }
    }
}
