//! A tenant's books, read only: identities (status, sub-status, an open
//! RFI; each with its virtual accounts' deposit instructions and its mint
//! instructions' wire details, to copy), accounts (each with its balances,
//! read from the chains as the API reads them), transfers, and conversions
//! with their event history.

use askama::Template;
use axum::{
    extract::{Path, State},
    http::StatusCode,
    response::Response,
};

use super::{
    frame::{Frame, when},
    web::{Page, Tenant, render},
};
use crate::{
    api::ApiState,
    identity::SubStatus,
    store::{AccountPage, TransferPage},
};

/// How many of each list a page shows.
const SHOWN: u32 = 100;

fn pretty(value: &impl serde::Serialize) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

struct IdentityRow {
    id: String,
    label: String,
    kind: &'static str,
    status: &'static str,
    sub_status: &'static str,
    rfi: bool,
    fiat: bool,
}

impl From<crate::identity::Identity> for IdentityRow {
    fn from(i: crate::identity::Identity) -> Self {
        IdentityRow {
            label: i.label.expose().clone(),
            kind: i.kind.as_str(),
            status: i.status.as_str(),
            sub_status: i.sub_status.map_or("", SubStatus::as_str),
            rfi: i.sub_status == Some(SubStatus::RfiRequired),
            fiat: i.fiat_operations_enabled,
            id: i.id,
        }
    }
}

#[derive(Template)]
#[template(path = "console/identities.html")]
struct IdentitiesPage {
    frame: Frame,
    identities: Vec<IdentityRow>,
}

/// `GET /console/identities`.
pub async fn identities(State(state): State<ApiState>, tenant: Tenant) -> Result<Response, Page> {
    let identities = state.store().identity_page(&tenant.organization, None, SHOWN).await?;
    let identities = identities.into_iter().map(IdentityRow::from).collect();
    let frame = Frame::of(&state, &tenant.session, "/console/identities");
    Ok(render(StatusCode::OK, &IdentitiesPage { frame, identities }))
}

/// Something to copy: a title, an element id and the text.
struct Copyable {
    title: String,
    id: String,
    text: String,
}

#[derive(Template)]
#[template(path = "console/identity.html")]
struct IdentityPage {
    frame: Frame,
    identity: IdentityRow,
    virtual_accounts: Vec<Copyable>,
    mint_instructions: Vec<Copyable>,
}

/// `GET /console/identities/{id}`.
pub async fn identity(
    State(state): State<ApiState>,
    tenant: Tenant,
    Path(id): Path<String>,
) -> Result<Response, Page> {
    let store = state.store();
    let org = &tenant.organization;
    let identity = store.identity(org, &id).await?;
    let virtual_accounts = store
        .virtual_account_page(org, &id, None, None, SHOWN)
        .await?
        .into_iter()
        .enumerate()
        .map(|(n, va)| Copyable {
            title: format!(
                "Virtual account {} ({}): wire US dollars to these details; they arrive as {} on {}",
                va.id,
                va.status.as_str(),
                va.destination.currency,
                va.destination.chain.as_str()
            ),
            id: format!("va-{n}"),
            text: va
                .deposit_instructions
                .as_ref()
                .map_or_else(|| "no deposit instructions yet".into(), pretty),
        })
        .collect();
    let mint_instructions = store
        .mint_instruction_page(org, Some(&id), None, SHOWN)
        .await?
        .into_iter()
        .enumerate()
        .map(|(n, mi)| Copyable {
            title: format!("Mint instruction {}: {} on {}, memo {}", mi.id, mi.stablecoin_symbol, mi.chain.as_str(), mi.memo_id),
            id: format!("mi-{n}"),
            text: pretty(&serde_json::json!({ "memo_id": mi.memo_id, "bank_account_details": mi.bank_account_details })),
        })
        .collect();
    let identity = IdentityRow::from(identity);
    let frame = Frame::of(&state, &tenant.session, "/console/identities");
    Ok(render(StatusCode::OK, &IdentityPage { frame, identity, virtual_accounts, mint_instructions }))
}

struct AccountRow {
    id: String,
    identity_id: String,
    kind: &'static str,
    status: &'static str,
    addresses: String,
}

#[derive(Template)]
#[template(path = "console/accounts.html")]
struct AccountsPage {
    frame: Frame,
    accounts: Vec<AccountRow>,
}

/// `GET /console/accounts`.
pub async fn accounts(State(state): State<ApiState>, tenant: Tenant) -> Result<Response, Page> {
    let page = AccountPage {
        organization: tenant.organization.clone(),
        identity_ids: Vec::new(),
        after: None,
        limit: SHOWN,
    };
    let accounts = state
        .store()
        .account_page(&page)
        .await?
        .into_iter()
        .map(|a| AccountRow {
            kind: a.kind.as_str(),
            status: a.status.as_str(),
            addresses: a.addresses.iter().map(|x| x.address.as_str()).collect::<Vec<_>>().join(", "),
            identity_id: a.identity_id,
            id: a.id,
        })
        .collect();
    let frame = Frame::of(&state, &tenant.session, "/console/accounts");
    Ok(render(StatusCode::OK, &AccountsPage { frame, accounts }))
}

struct BalanceRow {
    chain: &'static str,
    symbol: String,
    total: String,
    available: String,
}

#[derive(Template)]
#[template(path = "console/account.html")]
struct AccountView {
    frame: Frame,
    id: String,
    balances: Vec<BalanceRow>,
}

/// `GET /console/accounts/{id}`: its balances, read from the chains.
pub async fn account(
    State(state): State<ApiState>,
    tenant: Tenant,
    Path(id): Path<String>,
) -> Result<Response, Page> {
    let balances = crate::api::assets::account_balances(&state, &tenant.organization, &id, None)
        .await?
        .into_iter()
        .map(|b| BalanceRow {
            chain: b.chain.as_str(),
            symbol: b.symbol,
            total: b.total,
            available: b.available,
        })
        .collect();
    let frame = Frame::of(&state, &tenant.session, "/console/accounts");
    Ok(render(StatusCode::OK, &AccountView { frame, id, balances }))
}

struct TransferRow {
    id: String,
    account_id: String,
    chain: &'static str,
    amount: String,
    destination: String,
    status: String,
    created: String,
}

#[derive(Template)]
#[template(path = "console/transfers.html")]
struct TransfersPage {
    frame: Frame,
    transfers: Vec<TransferRow>,
}

/// `GET /console/transfers`.
pub async fn transfers(State(state): State<ApiState>, tenant: Tenant) -> Result<Response, Page> {
    let page = TransferPage {
        organization: tenant.organization.clone(),
        account_id: None,
        identity_id: None,
        status: None,
        after: None,
        limit: SHOWN,
    };
    let transfers = state
        .store()
        .transfer_page(&page)
        .await?
        .into_iter()
        .map(|t| TransferRow {
            chain: t.destination_chain.as_str(),
            amount: format!("{} {}", t.amount, t.currency_symbol),
            status: serde_json::to_value(t.status)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default(),
            created: when(&t.created_at),
            destination: t.destination_address,
            account_id: t.account_id,
            id: t.id,
        })
        .collect();
    let frame = Frame::of(&state, &tenant.session, "/console/transfers");
    Ok(render(StatusCode::OK, &TransfersPage { frame, transfers }))
}

struct ConversionRow {
    id: String,
    kind: String,
    status: String,
    created: String,
    events: Vec<(String, String, String)>,
}

#[derive(Template)]
#[template(path = "console/conversions.html")]
struct ConversionsPage {
    frame: Frame,
    conversions: Vec<ConversionRow>,
}

/// `GET /console/conversions`: the newest 20, each with its events.
pub async fn conversions(State(state): State<ApiState>, tenant: Tenant) -> Result<Response, Page> {
    let store = state.store();
    let text = |value: serde_json::Value| value.as_str().map(String::from).unwrap_or_default();
    let mut conversions = Vec::new();
    for c in store.conversions_of(&tenant.organization, 20).await? {
        let events = store
            .events_of_resource(&tenant.organization, &c.id)
            .await?
            .into_iter()
            .map(|(kind, at, payload)| {
                let at = when(&chrono::DateTime::from_timestamp_micros(at).unwrap_or_default());
                let status = serde_json::from_str::<serde_json::Value>(&payload)
                    .ok()
                    .and_then(|p| p["data"]["status"].as_str().map(String::from))
                    .unwrap_or_default();
                (at, kind, status)
            })
            .collect();
        conversions.push(ConversionRow {
            kind: text(serde_json::to_value(c.kind).unwrap_or_default()),
            status: text(serde_json::to_value(c.status).unwrap_or_default()),
            created: when(&c.created_at),
            id: c.id,
            events,
        });
    }
    let frame = Frame::of(&state, &tenant.session, "/console/conversions");
    Ok(render(StatusCode::OK, &ConversionsPage { frame, conversions }))
}
