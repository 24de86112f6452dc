//! Operators' pages: the queues (identities waiting for a compliance
//! decision; wires waiting for a second treasury operator) and the audit
//! log with the result of verifying its chain. Each decision goes through
//! the same function as the operator API, as the signed-in operator, and
//! lands in the audit log; tenant users get `404` here.

use askama::Template;
use axum::{
    Form,
    extract::{Path, Query, State},
    http::StatusCode,
    response::{Redirect, Response},
};
use serde::Deserialize;

use super::{
    frame::{Frame, when},
    names::Names,
    operator::{OperatorUser, required},
    web::{Page, render},
};
use crate::{
    api::ApiState,
    audit::{Actor, chain},
    identity::decide::{self, Decision},
    issuance::{state::Status as MintStatus, wires},
    operators::{Action, Role, rules},
};

/// How many of each queue a page shows.
const SHOWN: i64 = 100;

struct IdentityRow {
    organization: String,
    id: String,
    label: String,
    kind: &'static str,
    sub_status: String,
    created: String,
}

struct WireRow {
    id: String,
    organization: String,
    amount: String,
    chain: &'static str,
    recorded_by: String,
    /// Whether this operator may decide it: not the recorder.
    may_decide: bool,
}

#[derive(Template)]
#[template(path = "console/queues.html")]
struct QueuesPage {
    frame: Frame,
    compliance: bool,
    treasury: bool,
    identities: Vec<IdentityRow>,
    wires: Vec<WireRow>,
    payouts: Vec<super::treasury_pages::PayoutRow>,
    virtual_accounts: Vec<super::treasury_pages::VirtualAccountRow>,
}

/// `GET /console/queues`.
pub async fn queues(State(state): State<ApiState>, user: OperatorUser) -> Result<Response, Page> {
    let store = state.store();
    let (compliance, treasury) = (user.operator.has(Role::Compliance), user.operator.has(Role::Treasury));
    let mut identities = Vec::new();
    if compliance {
        for identity in store.identities_in_onboarding(SHOWN).await? {
            identities.push(IdentityRow {
                label: identity.label.expose().clone(),
                kind: identity.kind.as_str(),
                sub_status: identity.sub_status.map(|s| s.as_str().to_string()).unwrap_or_default(),
                created: when(&identity.created_at),
                organization: identity.organization,
                id: identity.id,
            });
        }
    }
    let mut wires = Vec::new();
    if treasury {
        let me = user.actor();
        let mut names = Names::load(store).await?;
        for mint in store.mint_page(Some(MintStatus::AwaitingApproval), None, SHOWN as u32).await? {
            let recorder = store.mint_recorder(&mint.id).await?;
            let may_decide =
                recorder.as_deref().is_none_or(|r| rules::second_pair(&Actor::from_recorded(r), &me).is_ok());
            let recorded_by = match recorder {
                Some(recorder) => names.of(store, &recorder).await?,
                None => "the bank's file".into(),
            };
            wires.push(WireRow {
                recorded_by,
                may_decide,
                amount: format!("{} {}", mint.amount, mint.stablecoin_symbol),
                chain: mint.chain.as_str(),
                organization: mint.organization,
                id: mint.id,
            });
        }
    }
    let (payouts, virtual_accounts) = match treasury {
        true => super::treasury_pages::queues(store).await?,
        false => Default::default(),
    };
    let frame = Frame::of(&state, &user.session, "/console/queues");
    let page = QueuesPage { frame, compliance, treasury, identities, wires, payouts, virtual_accounts };
    Ok(render(StatusCode::OK, &page))
}

#[derive(Deserialize)]
pub struct DecisionForm {
    decision: String,
    reason: String,
}

/// `POST /console/queues/identities/{organization}/{id}`: approve, reject
/// or raise an RFI, with a reason.
pub async fn decide_identity(
    State(state): State<ApiState>,
    user: OperatorUser,
    Path((organization, id)): Path<(String, String)>,
    Form(form): Form<DecisionForm>,
) -> Result<Redirect, Page> {
    user.may(Action::IdentityDecision)?;
    let decision = match form.decision.as_str() {
        "approve" => Decision::Approve,
        "reject" => Decision::Reject,
        "rfi_raise" => Decision::RfiRaise,
        other => {
            return Err(Page::Error(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("decision: {other:?} is not one of the queue's"),
            ));
        }
    };
    let reason = required(&form.reason)?;
    decide::decide(state.store(), state.chains(), (&organization, &id), decision, &user.actor(), reason)
        .await?;
    Ok(Redirect::to("/console/queues"))
}

#[derive(Deserialize)]
pub struct WireForm {
    #[serde(default)]
    reason: String,
}

/// `POST /console/queues/wires/{mint}/approve` (or `/refuse`): the same
/// four-eyes rule as the operator API: the wire's recorder is refused.
pub async fn decide_wire(
    State(state): State<ApiState>,
    user: OperatorUser,
    Path((mint, verb)): Path<(String, String)>,
    Form(form): Form<WireForm>,
) -> Result<Redirect, Page> {
    user.may(Action::Wire)?;
    let approve = match verb.as_str() {
        "approve" => true,
        "refuse" => false,
        _ => return Err(Page::not_found()),
    };
    let reason = Some(form.reason.trim()).filter(|r| !r.is_empty());
    wires::decide(state.store(), &mint, &user.actor(), approve, reason).await.map_err(
        |error| match error {
            refusal @ wires::DecideError::FourEyes { .. } => {
                Page::Error(StatusCode::FORBIDDEN, refusal.to_string())
            }
            wires::DecideError::Store(error) => error.into(),
        },
    )?;
    Ok(Redirect::to("/console/queues"))
}

struct AuditRow {
    seq: i64,
    at: String,
    actor: String,
    action: String,
    target: String,
    organization: String,
}

#[derive(Template)]
#[template(path = "console/audit.html")]
struct AuditPage {
    frame: Frame,
    filter: AuditFilter,
    verified: String,
    intact: bool,
    entries: Vec<AuditRow>,
}

#[derive(Debug, Default, Deserialize)]
pub struct AuditFilter {
    #[serde(default)]
    organization: String,
    #[serde(default)]
    action: String,
}

/// `GET /console/audit`: the newest entries (of one organization, of one
/// action), and the chain verified.
pub async fn audit(
    State(state): State<ApiState>,
    user: OperatorUser,
    Query(filter): Query<AuditFilter>,
) -> Result<Response, Page> {
    user.may(Action::Audit)?;
    let store = state.store();
    let (verified, intact) = match chain::verify_store(store).await? {
        Ok((count, head)) => (format!("The chain is intact: {count} entries, head {head}."), true),
        Err(broken) => (format!("The chain is BROKEN at entry {}: {}.", broken.seq, broken.why), false),
    };
    let organization = Some(filter.organization.trim()).filter(|o| !o.is_empty());
    let (head, _) = store.audit_head().await?;
    let from = (head - 500).max(0);
    let mut names = Names::load(store).await?;
    let mut entries = Vec::new();
    for e in store.audit_entries(from, organization, 500).await? {
        if !filter.action.trim().is_empty() && !e.action.contains(filter.action.trim()) {
            continue;
        }
        let named = names.of(store, &e.actor).await?;
        entries.push(AuditRow {
            at: when(&chrono::DateTime::from_timestamp_micros(e.at).unwrap_or_default()),
            // What the entry itself recorded of its actor (a break-glass
            // step's process user, a command's `--by`) stays beside it.
            actor: match &e.actor_name {
                Some(name) if named == e.actor => format!("{} ({name})", e.actor),
                Some(name) if !named.starts_with(&format!("{name} <")) => {
                    format!("{named}; recorded as {name}")
                }
                _ => named,
            },
            target: format!("{} {}", e.target_kind, e.target_id),
            organization: e.organization_id.clone().unwrap_or_default(),
            seq: e.seq,
            action: e.action,
        });
    }
    entries.reverse();
    let frame = Frame::of(&state, &user.session, "/console/audit");
    Ok(render(StatusCode::OK, &AuditPage { frame, filter, verified, intact, entries }))
}
