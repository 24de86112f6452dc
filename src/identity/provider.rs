//! Compliance decisions come from a provider behind [`Provider`]; the
//! [`worker`] asks it about every identity in onboarding and applies what it
//! answers, each decision with its check in one transaction, and expires
//! identity verification checks not completed in time.
//!
//! The [`Sandbox`] provider decides deterministically from the submitted
//! data, on `kyc.last_name` or `kyb.business_name` (case-insensitive):
//!
//! | value | outcome |
//! |---|---|
//! | `Deny` | KYC/KYB denied: `REJECTED` |
//! | `Rfi` | an RFI is raised; data resubmitted without `Rfi` fulfils it, and the checks go on |
//! | `Idv` | individuals: a verification check is issued, opened and completed, then approved |
//! | `IdvExpire` | individuals: a check is issued and never opened, so it expires (`IDV_EXPIRED`) |
//! | anything else | approved: `ACTIVE` |
//!
//! One step per review, like a real provider's callbacks arriving one by one.

use std::{future::Future, time::Duration};

use chrono::Utc;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::{
    CheckStatus, Event, IdVerificationCheck, State, Step, Type, compliance::decisive_name, review::Decided,
};
use crate::store::{CheckStep, Review, Store, StoreError, now_micros};

/// A provider's answer about one identity.
#[derive(Debug, Clone)]
pub struct Decision {
    pub event: Event,
    pub step: CheckStep,
    pub reason: Option<String>,
}

impl Decision {
    /// This decision, taken by `actor`, as [`super::review::decide`] applies it.
    pub fn decided<'a>(&'a self, actor: &'a str) -> Decided<'a> {
        Decided { event: self.event, step: &self.step, actor, reason: self.reason.as_deref() }
    }
}

/// A compliance provider. `review` answers the next decision for an
/// identity in onboarding, or `None` to wait (for the client, the
/// individual, or time).
pub trait Provider: Send + Sync {
    fn name(&self) -> &str;
    fn review(&self, review: &Review)
    -> impl Future<Output = Result<Option<Decision>, ProviderError>> + Send;
}

#[derive(Debug, thiserror::Error)]
#[error("compliance provider {provider} failed: {message}")]
pub struct ProviderError {
    pub provider: String,
    pub message: String,
}

/// How the worker runs.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Between two rounds of reviews.
    pub poll: Duration,
    /// How long an identity verification check stays open.
    pub idv_expiry: Duration,
    /// Reviews read at once; a round reads page after page until it has
    /// seen every identity in onboarding.
    pub review_page: u32,
}

impl Default for Options {
    fn default() -> Self {
        Self { poll: Duration::from_secs(1), idv_expiry: Duration::from_secs(24 * 3600), review_page: 100 }
    }
}

/// The deterministic sandbox provider (see the module doc).
#[derive(Debug, Clone)]
pub struct Sandbox {
    /// Where verification URLs point.
    pub verification_base: String,
    pub idv_expiry: Duration,
}

impl Sandbox {
    pub fn new(idv_expiry: Duration) -> Self {
        Self { verification_base: "https://verify.sandbox.invalid/checks".into(), idv_expiry }
    }

    /// The decision on `review`, without I/O.
    pub fn decide(&self, review: &Review) -> Option<Decision> {
        let name = decisive_name(&review.submission).trim().to_ascii_uppercase();
        let individual = review.kind == Type::Individual;
        let plain = |event| Some(Decision { event, step: CheckStep::None, reason: None });
        let State::Onboarding { step, rfi } = review.state else { return None };
        if rfi {
            let answered = review.rfi_opened_at.is_some_and(|at| review.submitted_at > at);
            return (answered && name != "RFI").then(|| Decision {
                event: Event::RfiFulfilled,
                step: CheckStep::None,
                reason: Some("the requested information was submitted".into()),
            });
        }
        let check = review.check.as_ref().map(|c| c.status);
        match step {
            Step::ComplianceChecks => match name.as_str() {
                "DENY" => Some(Decision {
                    event: Event::Denied,
                    step: CheckStep::None,
                    reason: Some("sandbox: the submitted data was denied".into()),
                }),
                "RFI" => Some(Decision {
                    event: Event::RfiRaised,
                    step: CheckStep::None,
                    reason: Some("sandbox: please correct and resubmit the data".into()),
                }),
                "IDV" | "IDVEXPIRE" if individual && check != Some(CheckStatus::Completed) => {
                    plain(Event::IdvRequired)
                }
                _ => plain(Event::Approved),
            },
            Step::IdvRequired => Some(Decision {
                event: Event::IdvRequested,
                step: CheckStep::Issue(Box::new(self.check(review))),
                reason: None,
            }),
            Step::IdvRequested if name != "IDVEXPIRE" => Some(Decision {
                event: Event::IdvStarted,
                step: CheckStep::Set(CheckStatus::InProgress),
                reason: None,
            }),
            Step::IdvInProgress => Some(Decision {
                event: Event::IdvCompleted,
                step: CheckStep::Set(CheckStatus::Completed),
                reason: None,
            }),
            Step::Created | Step::IdvRequested | Step::IdvExpired => None,
        }
    }

    fn check(&self, review: &Review) -> IdVerificationCheck {
        let id = uuid::Uuid::new_v4().to_string();
        let now = Utc::now();
        IdVerificationCheck {
            verification_url: format!("{}/{id}", self.verification_base),
            id,
            identity_id: review.identity_id.clone(),
            reason: "ONBOARDING".into(),
            request_id: uuid::Uuid::new_v4().to_string(),
            redirect_url: None,
            status: CheckStatus::NotStarted,
            created_at: now,
            updated_at: now,
            labels: Vec::new(),
            submission_id: review.submission_id.clone(),
            expires_at: now + chrono::Duration::from_std(self.idv_expiry).unwrap_or(chrono::Duration::MAX),
        }
    }
}

impl Provider for Sandbox {
    fn name(&self) -> &str {
        "sandbox"
    }

    async fn review(&self, review: &Review) -> Result<Option<Decision>, ProviderError> {
        Ok(self.decide(review))
    }
}

/// Reviews identities in onboarding with `provider` and expires checks,
/// every `options.poll`, until `shutdown`. Safe to run in several
/// processes: a decision applies only to the state it was taken on.
pub async fn worker<P: Provider>(store: Store, provider: P, options: Options, shutdown: CancellationToken) {
    loop {
        if let Err(error) = round(&store, &provider, options.review_page).await {
            warn!(error = %error, "compliance review failed; retrying");
        }
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(options.poll) => {}
        }
    }
}

/// How long the provider's "wait" on an unchanged identity holds before it
/// is asked again (a change to the identity asks at once).
pub const RECHECK: Duration = Duration::from_secs(60);

/// One round: expiries first, then one decision per identity due for a
/// review, `page` at a time. An identity the provider waits on (for its
/// client, the individual, or time) is not read again until it changes or
/// [`RECHECK`] passes, so a round over thousands of waiting identities is a
/// few statements, not one read per identity.
pub async fn round<P: Provider>(store: &Store, provider: &P, page: u32) -> Result<(), anyhow::Error> {
    for identity in super::review::expire_checks(store, now_micros()).await? {
        info!(identity = %identity, "identity verification check expired");
    }
    let actor = format!("provider:{}", provider.name());
    let (until, page) = (now_micros(), page.max(1));
    let review_after = until.saturating_add(RECHECK.as_micros() as i64);
    let mut after = None;
    loop {
        let reviews = store.reviews(after.as_ref(), until, page).await?;
        let mut waiting = Vec::new();
        for review in &reviews {
            if !decide(store, provider, review, &actor).await? {
                waiting.push(review);
            }
        }
        super::review::wait_on(store, &waiting, review_after).await?;
        if reviews.len() < page as usize {
            return Ok(());
        }
        after = reviews.into_iter().last();
    }
}

/// Asks `provider` about `review` and applies its decision; whether it decided.
async fn decide<P: Provider>(
    store: &Store,
    provider: &P,
    review: &Review,
    actor: &str,
) -> Result<bool, anyhow::Error> {
    let Some(decision) = provider.review(review).await? else { return Ok(false) };
    match super::review::decide(store, review, &decision.decided(actor)).await {
        Ok(_) => info!(identity = %review.identity_id, event = ?decision.event, "compliance decision"),
        Err(StoreError::Refused(refusal)) => warn!(%refusal, "compliance decision refused"),
        Err(error) => return Err(error.into()),
    }
    Ok(true)
}
