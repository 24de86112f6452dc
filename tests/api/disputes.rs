//! `GET /operator/v1/disputes` and `GET /operator/v1/reconciliation` on
//! both stores: the providers' disputes a quorum step recorded and each
//! chain's last reconciliation, for compliance, treasury and admin
//! operators alike, filtered by chain (disputes also by being open); a
//! tenant's key and a malformed query refused.

use crate::common;

use alloy::transports::http::reqwest::Method;
use common::{
    api::{send_json, spawn_app},
    db::BACKENDS,
};
use custody_indexer::deposits::commit;
use custody_indexer::{
    api::RateLimit,
    chain::Chain,
    config::Chains,
    deposits::quorum::{Answer, Claimed, Decision, Dispute},
    reconcile::Run,
    store::{QuorumSettlement, now_micros, reconcile_runs},
};
use serde_json::json;

use super::operator_decisions::staff;

fn claimed(id: &str, chain: Chain) -> Claimed {
    Claimed {
        id: id.into(),
        chain,
        tx_hash: format!("0x{}", "ab".repeat(32)),
        position: "native".into(),
        account_id: "acct-1".into(),
        address: "0x00000000000000000000000000000000000000a1".into(),
        symbol: "ETH".into(),
        amount_raw: "1000".into(),
        block_number: 42,
        block_hash: "0xaa".into(),
    }
}

async fn get(base: &str, path: &str, token: &str) -> common::api::Answer {
    send_json(Method::GET, &format!("{base}{path}"), Some(token), None).await
}

#[tokio::test]
async fn operators_of_every_role_list_the_providers_disputes_and_the_reconciliations() {
    for backend in BACKENDS {
        let app = spawn_app(backend, Chains::default(), RateLimit::default()).await;
        let tenant = app.key("acme").await;
        let staff = staff(&app).await;
        let answers = |holds: bool| {
            vec![
                ("https://a.example/".to_string(), Answer::Serves { hash: "0xaa".into(), holds: true }),
                ("https://b.example/".to_string(), Answer::Serves { hash: "0xaa".into(), holds }),
            ]
        };
        let settlement = QuorumSettlement {
            disputes: vec![
                Dispute::new(
                    &claimed("dep-failed", Chain::EthereumTestnet),
                    "0xaa",
                    &answers(false),
                    Decision::Fail,
                ),
                Dispute::new(
                    &claimed("dep-open", Chain::BaseSepolia),
                    "0xaa",
                    &answers(false),
                    Decision::Wait,
                ),
            ],
            ..Default::default()
        };
        let (_, new) = commit::settle_on_quorum(app.store(), &settlement).await.unwrap();
        assert_eq!(new.len(), 2, "{backend:?}: two new disputes");
        let (_, again) = commit::settle_on_quorum(app.store(), &settlement).await.unwrap();
        assert!(again.is_empty(), "{backend:?}: a dispute is new once");

        for (operator, key) in &staff {
            let listed = get(&app.base, "/operator/v1/disputes", key).await;
            assert_eq!(listed.status, 200, "{backend:?} {:?}: {:?}", operator.roles, listed.body);
            let ids: Vec<&str> = listed.body["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d["deposit_id"].as_str().unwrap())
                .collect();
            assert_eq!(ids.len(), 2, "{ids:?}");
        }
        let key = &staff[2].1;
        let failed = get(&app.base, "/operator/v1/disputes?chain=ETHEREUM_TESTNET", key).await;
        let dispute = &failed.body["data"][0];
        assert_eq!(failed.body["data"].as_array().unwrap().len(), 1, "{:?}", failed.body);
        // No such deposit is pending here, so nothing settled: still open.
        assert_eq!(dispute["outcome"], json!("OPEN"));
        assert_eq!(
            dispute["answers"],
            json!([
                {"url": "https://a.example/", "answered": "the block with the deposit"},
                {"url": "https://b.example/", "answered": "the block without the deposit"},
            ])
        );
        let open = get(&app.base, "/operator/v1/disputes?open=true&chain=BASE_SEPOLIA", key).await;
        assert_eq!(open.body["data"][0]["deposit_id"], json!("dep-open"), "{:?}", open.body);
        assert_eq!(open.body["data"].as_array().unwrap().len(), 1);

        assert_eq!(get(&app.base, "/operator/v1/disputes?chain=MOON", key).await.status, 400);
        assert_eq!(get(&app.base, "/operator/v1/disputes?limit=0", key).await.status, 400);
        let refused = get(&app.base, "/operator/v1/disputes", &tenant).await;
        assert!([401, 403].contains(&refused.status), "{backend:?}: a tenant's key: {}", refused.status);

        // The last reconciliation of each chain, kept again by the next.
        for (at_block, differ, period_ms) in [(10, 2, None), (12, 1, Some(3_650_000))] {
            let run = Run {
                chain: "ETHEREUM_TESTNET".into(),
                at: String::new(),
                at_micros: now_micros(),
                started_micros: now_micros() - 1_500_000,
                took_ms: 1500,
                slices: 3,
                every_ms: 3_600_000,
                period_ms,
                at_block,
                lines: 4,
                differ,
                failed: 0,
                skipped: 1,
                detail: json!({ "differences": [{ "address": "0xa1", "difference": "-1" }], "failed": [] }),
            };
            let mut tx = app.store().begin().await.unwrap();
            reconcile_runs::record_run(&mut tx, &run).await.unwrap();
            tx.commit().await.unwrap();
        }
        for (_, key) in &staff {
            let runs = get(&app.base, "/operator/v1/reconciliation", key).await;
            assert_eq!(runs.status, 200, "{backend:?}: {:?}", runs.body);
            let data = runs.body["data"].as_array().unwrap();
            assert_eq!(data.len(), 1, "{backend:?}: one per chain: {data:?}");
            assert_eq!((data[0]["at_block"].as_u64(), data[0]["differ"].as_u64()), (Some(12), Some(1)));
            assert_eq!(data[0]["detail"]["differences"][0]["difference"], "-1");
            let spread = (&data[0]["slices"], &data[0]["every_ms"], &data[0]["period_ms"]);
            assert_eq!(
                spread,
                (&json!(3), &json!(3_600_000), &json!(3_650_000)),
                "{backend:?}: {:?}",
                data[0]
            );
        }
        let other = get(&app.base, "/operator/v1/reconciliation?chain=BASE_SEPOLIA", key).await;
        assert_eq!(other.body["data"], json!([]), "{backend:?}");
        assert_eq!(get(&app.base, "/operator/v1/reconciliation?chain=MOON", key).await.status, 400);
        let refused = get(&app.base, "/operator/v1/reconciliation", &tenant).await;
        assert!([401, 403].contains(&refused.status), "{backend:?}: a tenant's key: {}", refused.status);
    }
}
