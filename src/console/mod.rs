//! The console: tenants' pages (API keys, webhooks, deposits, identities,
//! accounts, transfers, conversions, team, activity) and operators' pages (queues, chains, audit) under
//! `/console/`, served by the same server as the API with the same store.
//! Pages are rendered on the server (askama templates under
//! `templates/console/`, checked at compile time) with htmx for partial
//! updates; htmx, the script and the styles are files of the repository
//! (`assets/console/`) built into the binary: no CDN, works offline.
//!
//! People ([`crate::people`]) enrol from a one-time link, sign in with a
//! password and an optional TOTP code; sessions live in the store, so
//! every instance shares them. Every
//! state-changing request is checked by [`web::guard`]: same origin, a live
//! session and its CSRF token. docs/console.md describes it all.

mod assets;
mod auth_pages;
mod books_page;
mod chains_page;
mod enrol_api;
mod factor_page;
mod frame;
mod hooks_page;
mod keys_page;
mod money_page;
mod names;
mod operator;
mod operator_keys_page;
mod operator_pages;
mod team_page;
mod treasury_pages;
mod web;

use axum::{
    Router, middleware,
    routing::{get, post},
};

use crate::api::ApiState;

pub use web::COOKIE;

/// The console's routes.
pub fn router(state: ApiState) -> Router<ApiState> {
    Router::new()
        .route("/console", get(auth_pages::home))
        .route("/console/", get(auth_pages::home))
        .route("/console/sign-in", get(auth_pages::sign_in_page).post(auth_pages::sign_in))
        .route("/console/sign-out", post(auth_pages::sign_out))
        .route("/console/second-factor", get(factor_page::show).post(factor_page::add))
        .route("/console/enrol/{token}", get(auth_pages::enrol_page).post(auth_pages::enrol))
        .route("/console/keys", get(keys_page::list).post(keys_page::create))
        .route("/console/keys/{id}", get(keys_page::show))
        .route("/console/keys/{id}/revoke", post(keys_page::revoke))
        .route("/console/keys/{id}/pair", post(keys_page::pair))
        .route("/console/keys/{id}/unpair", post(keys_page::unpair))
        .route("/console/team", get(team_page::list).post(team_page::invite))
        .route("/console/team/{id}/role", post(team_page::set_role))
        .route("/console/team/{id}/remove", post(team_page::remove))
        .route("/console/team/{id}/link", post(team_page::reissue))
        .route("/console/webhooks", get(hooks_page::list).post(hooks_page::register))
        .route("/console/webhooks/{id}", get(hooks_page::show))
        .route("/console/webhooks/{id}/rotate", post(hooks_page::rotate))
        .route("/console/webhooks/{id}/deliveries/{delivery}/resend", post(hooks_page::resend))
        .route("/console/deposits", get(money_page::deposits))
        .route("/console/deposits/rows", get(money_page::deposit_rows))
        .route("/console/activity", get(money_page::activity))
        .route("/console/identities", get(books_page::identities))
        .route("/console/identities/{id}", get(books_page::identity))
        .route("/console/accounts", get(books_page::accounts))
        .route("/console/accounts/{id}", get(books_page::account))
        .route("/console/transfers", get(books_page::transfers))
        .route("/console/conversions", get(books_page::conversions))
        .route("/console/queues", get(operator_pages::queues))
        .route("/console/queues/identities/{organization}/{id}", post(operator_pages::decide_identity))
        .route("/console/queues/wires/{mint}/{verb}", post(operator_pages::decide_wire))
        .route("/console/queues/payouts/{id}", post(treasury_pages::answer_payout))
        .route("/console/queues/payouts/{id}/confirm", post(treasury_pages::confirm_payout))
        .route("/console/queues/virtual-accounts/{id}/{verb}", post(treasury_pages::answer_virtual_account))
        .route("/console/audit", get(operator_pages::audit))
        .route("/console/operator/keys", get(operator_keys_page::show).post(operator_keys_page::make))
        .route("/console/chains", get(chains_page::chains))
        .route("/console/assets/{file}", get(assets::serve))
        .layer(middleware::from_fn_with_state(state.clone(), web::guard))
        .layer(middleware::from_fn_with_state(state, web::headers))
}
