//! The deposits tab (filtered by account, chain and status; its rows
//! refreshed every two seconds, so a new deposit shows without a reload)
//! and the activity tab (the organization's audit entries, a platform
//! operator's by the operator's name only, the platform's other decisions
//! as "the platform", never why).

use askama::Template;
use axum::{
    extract::{Query, State},
    http::StatusCode,
    response::Response,
};
use serde::Deserialize;

use super::{
    frame::{Frame, when},
    web::{Page, Tenant, render},
};
use crate::{api::ApiState, chain::Chain, deposits::resource::DepositStatus};

/// The deposits a page shows.
const SHOWN: i64 = 100;

#[derive(Debug, Default, Deserialize)]
pub struct Filter {
    #[serde(default)]
    account: String,
    #[serde(default)]
    chain: String,
    #[serde(default)]
    status: String,
}

impl Filter {
    /// The filter as a query string, for the rows' refresh.
    fn query(&self) -> String {
        url::form_urlencoded::Serializer::new(String::new())
            .append_pair("account", self.account.trim())
            .append_pair("chain", &self.chain)
            .append_pair("status", &self.status)
            .finish()
    }
}

/// A deposit as a row shows it.
struct Row {
    id: String,
    account_id: String,
    chain: &'static str,
    amount: String,
    currency: String,
    status: &'static str,
    transaction_hash: String,
    created: String,
}

#[derive(Template)]
#[template(path = "console/deposit_rows.html")]
struct Rows {
    rows: Vec<Row>,
}

#[derive(Template)]
#[template(path = "console/deposits.html")]
struct DepositsPage {
    frame: Frame,
    filter: Filter,
    query: String,
    chains: Vec<&'static str>,
    statuses: [&'static str; 3],
    rows: Rows,
}

async fn rows(state: &ApiState, tenant: &Tenant, filter: &Filter) -> Result<Rows, Page> {
    let invalid =
        |what: &str| Page::Error(StatusCode::BAD_REQUEST, format!("{what} is not one the filter knows"));
    let chain = match filter.chain.as_str() {
        "" => None,
        text => Some(text.parse::<Chain>().map_err(|_| invalid("chain"))?),
    };
    let status = match filter.status.as_str() {
        "" => None,
        text => Some(text.parse::<DepositStatus>().map_err(|_| invalid("status"))?),
    };
    let account = Some(filter.account.trim()).filter(|a| !a.is_empty());
    let deposits =
        state.store().organization_deposits(&tenant.organization, account, chain, status, SHOWN).await?;
    let rows = deposits
        .into_iter()
        .map(|d| Row {
            chain: d.destination_chain.as_str(),
            status: d.status.as_str(),
            created: when(&d.created_at),
            id: d.id,
            account_id: d.account_id,
            amount: d.amount,
            currency: d.currency_symbol,
            transaction_hash: d.transaction_hash,
        })
        .collect();
    Ok(Rows { rows })
}

/// `GET /console/deposits`.
pub async fn deposits(
    State(state): State<ApiState>,
    tenant: Tenant,
    Query(filter): Query<Filter>,
) -> Result<Response, Page> {
    let rows = rows(&state, &tenant, &filter).await?;
    let page = DepositsPage {
        frame: Frame::of(&state, &tenant.session, "/console/deposits"),
        query: filter.query(),
        chains: state.chains().iter().map(|c| c.chain.as_str()).collect(),
        statuses: ["PENDING", "CONFIRMED", "FAILED"],
        filter,
        rows,
    };
    Ok(render(StatusCode::OK, &page))
}

/// `GET /console/deposits/rows`: the table's rows alone, for the refresh.
pub async fn deposit_rows(
    State(state): State<ApiState>,
    tenant: Tenant,
    Query(filter): Query<Filter>,
) -> Result<Response, Page> {
    Ok(render(StatusCode::OK, &rows(&state, &tenant, &filter).await?))
}

/// An audit entry as a tenant reads it.
struct Activity {
    at: String,
    who: String,
    action: String,
    target: String,
}

#[derive(Template)]
#[template(path = "console/activity.html")]
struct ActivityPage {
    frame: Frame,
    entries: Vec<Activity>,
}

/// `GET /console/activity`: the newest 200 entries of the organization.
pub async fn activity(State(state): State<ApiState>, tenant: Tenant) -> Result<Response, Page> {
    let store = state.store();
    let users = store.console_users_of(&tenant.organization).await?;
    let operators: std::collections::HashMap<String, String> =
        store.operators().await?.into_iter().map(|o| (o.id, o.name)).collect();
    let entries = store
        .audit_latest(&tenant.organization, 200)
        .await?
        .into_iter()
        .map(|entry| {
            let at = chrono::DateTime::from_timestamp_micros(entry.at).unwrap_or_default();
            Activity {
                at: when(&at),
                who: who(&entry.actor, &users, &operators),
                action: entry.action,
                target: format!("{} {}", entry.target_kind, entry.target_id),
            }
        })
        .collect();
    let page = ActivityPage { frame: Frame::of(&state, &tenant.session, "/console/activity"), entries };
    Ok(render(StatusCode::OK, &page))
}

/// Who an entry names, as the tenant may see it: its own people by email,
/// its keys by id, a platform operator (through the service or breaking
/// glass) by the operator's name only (never an email, an operating-system
/// user or a reason), anything else of the platform as "the platform".
fn who(
    actor: &str,
    users: &[crate::people::resource::User],
    operators: &std::collections::HashMap<String, String>,
) -> String {
    match actor.split_once(':') {
        Some(("user", id)) => {
            users.iter().find(|u| u.id == id).map_or_else(|| "a former member".into(), |u| u.email.clone())
        }
        Some(("api-key", id)) => format!("API key {id}"),
        Some(("operator" | "break-glass", id)) if operators.contains_key(id) => {
            format!("{} (platform operator)", operators[id])
        }
        _ => "the platform".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_sees_operators_by_name_and_nothing_else_of_the_platform() {
        let operators = std::collections::HashMap::from([("op_0123".to_string(), "Ann Ops".to_string())]);
        let table = [
            ("operator:op_0123", "Ann Ops (platform operator)"),
            ("break-glass:op_0123", "Ann Ops (platform operator)"),
            ("operator:ann", "the platform"),
            ("break-glass:root", "the platform"),
            ("local:ci", "the platform"),
            ("provider:sandbox", "the platform"),
            ("trail:operator:ann", "the platform"),
            ("system", "the platform"),
            ("api-key:5ad0", "API key 5ad0"),
            ("user:usr_gone", "a former member"),
        ];
        for (actor, shown) in table {
            assert_eq!(who(actor, &[], &operators), shown, "{actor}");
        }
    }
}
