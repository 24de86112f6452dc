//! `GET /console/chains`: each chain's health as `health` reports it, its
//! last reconciliation with each balance that differs from the ledger,
//! the providers' disputes, and the issuance books of each chain and
//! stablecoin, balanced.

use askama::Template;
use axum::{extract::State, http::StatusCode, response::Response};

use super::{
    frame::Frame,
    operator::OperatorUser,
    web::{Page, render},
};
use crate::{api::ApiState, deposits::quorum::Dispute, operators::Action, reconcile::Run};

/// The disputes the page lists at most, newest first.
const DISPUTES_SHOWN: i64 = 50;

struct ChainRow {
    chain: &'static str,
    status: &'static str,
    healthy: bool,
    head: String,
    indexed: String,
    lag: String,
    reconciled: String,
    problems: String,
}

struct BooksRow {
    chain: &'static str,
    symbol: String,
    line: String,
    agrees: bool,
    differences: Vec<String>,
}

/// A balance that differs from its ledger, as the last reconciliation found it.
struct DifferenceRow {
    chain: String,
    account: String,
    address: String,
    asset: String,
    difference: String,
    blocks: String,
}

struct DisputeRow {
    chain: &'static str,
    deposit: String,
    transaction: String,
    block: u64,
    outcome: &'static str,
    answers: Vec<String>,
}

#[derive(Template)]
#[template(path = "console/chains.html")]
struct ChainsPage {
    frame: Frame,
    healthy: bool,
    problems: Vec<String>,
    chains: Vec<ChainRow>,
    /// Whether the operator may read reconciliations and disputes.
    reconciles: bool,
    differences: Vec<DifferenceRow>,
    disputes: Vec<DisputeRow>,
    books: Vec<BooksRow>,
}

pub async fn chains(State(state): State<ApiState>, user: OperatorUser) -> Result<Response, Page> {
    let report = crate::deposits::health::check(state.store(), state.chains(), &[]).await;
    let number = |n: Option<u64>| n.map_or_else(|| "-".to_string(), |n| n.to_string());
    let chains = report
        .chains
        .iter()
        .map(|c| ChainRow {
            chain: c.chain.as_str(),
            status: c.status.as_str(),
            healthy: c.healthy,
            head: number(c.head),
            indexed: number(c.indexed),
            lag: format!("{} (limit {})", number(c.lag), c.lag_limit()),
            reconciled: c.reconciled.as_ref().map_or_else(|| "not yet".to_string(), |r| r.line()),
            problems: c.problems.iter().chain(&c.warnings).cloned().collect::<Vec<_>>().join("; "),
        })
        .collect();
    let reconciles = user.may(Action::Reconciliation).is_ok();
    let (differences, disputes) = if reconciles {
        let runs = state.store().reconcile_runs(None).await?;
        let disputes = state.store().disputes(None, false, DISPUTES_SHOWN).await?;
        (runs.iter().flat_map(differences).collect(), disputes.iter().map(dispute_row).collect())
    } else {
        (Vec::new(), Vec::new())
    };
    let frame = Frame::of(&state, &user.session, "/console/chains");
    let books = books(&state).await?;
    let healthy = report.healthy;
    let page = ChainsPage {
        frame,
        healthy,
        problems: report.problems,
        chains,
        reconciles,
        differences,
        disputes,
        books,
    };
    Ok(render(StatusCode::OK, &page))
}

/// The differing lines a run kept, as rows.
fn differences(run: &Run) -> Vec<DifferenceRow> {
    let lines = run.detail["differences"].as_array().cloned().unwrap_or_default();
    let text = |line: &serde_json::Value, field: &str| line[field].as_str().unwrap_or("-").to_string();
    lines
        .iter()
        .map(|line| {
            let blocks = line["divergent_blocks"].as_array().cloned().unwrap_or_default();
            let blocks: Vec<String> = blocks
                .iter()
                .map(|b| format!("{} in block {}", b["change"].as_str().unwrap_or("?"), b["block"]))
                .collect();
            DifferenceRow {
                chain: run.chain.clone(),
                // A platform wallet has no account: its role instead.
                account: match line["wallet"].as_str() {
                    Some(wallet) => format!("{wallet} wallet"),
                    None => text(line, "account_id"),
                },
                address: text(line, "address"),
                asset: text(line, "asset"),
                difference: text(line, "difference"),
                blocks: blocks.join("; "),
            }
        })
        .collect()
}

fn dispute_row(dispute: &Dispute) -> DisputeRow {
    DisputeRow {
        chain: dispute.chain.as_str(),
        deposit: dispute.deposit_id.clone(),
        transaction: dispute.transaction_hash.clone(),
        block: dispute.block_number,
        outcome: dispute.outcome.as_str(),
        answers: dispute.answers.iter().map(|a| format!("{}: {}", a.url, a.answered)).collect(),
    }
}

async fn books(state: &ApiState) -> Result<Vec<BooksRow>, Page> {
    Ok(crate::issuance::reconcile::books(state.store(), None, state.chains())
        .await?
        .into_iter()
        .map(|b| BooksRow {
            chain: b.chain.as_str(),
            line: format!(
                "received {} USD = minted {} + fees {} USD + returned {} USD + in flight {} USD; supply {} (being sent {})",
                b.fiat_received,
                b.minted,
                b.fees,
                b.fiat_returned,
                b.fiat_in_flight,
                b.supply.as_deref().unwrap_or("unknown"),
                b.being_sent
            ),
            agrees: b.agrees,
            differences: b.differences.into_iter().map(|d| d.message).collect(),
            symbol: b.stablecoin_symbol,
        })
        .collect())
}
