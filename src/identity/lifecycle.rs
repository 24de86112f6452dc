//! The identity state machine: [`apply`] takes a state and an event and
//! answers either a [`Refusal`] with its [`Reason`] or a [`Transition`] that
//! says what changed. Pure: whoever calls it stores the new state and, when
//! [`Transition::emits_event`], writes one `identity_status_update` in the
//! same transaction.
//!
//! The reference's status table:
//!
//! | From | Trigger | To |
//! |---|---|---|
//! | `PENDING_ONBOARDING` | compliance approval | `ACTIVE` |
//! | `PENDING_ONBOARDING` | KYC/KYB denied | `REJECTED` |
//! | `ACTIVE` | suspension by compliance | `SUSPENDED` |
//! | `SUSPENDED` | manual reinstatement | `ACTIVE`, with or without `RFI_REQUIRED` |
//! | any | termination | `TERMINATED` |
//!
//! and its sub-status rules: (1) compliance checks start when compliance
//! data is submitted; (2) an RFI can be raised at any onboarding step, on a
//! `SUSPENDED` and on an `ACTIVE` identity; (3) fulfilment returns to the
//! onboarding step the RFI interrupted, or clears the sub-status on an
//! `ACTIVE` or `SUSPENDED` identity; (4) any change of status closes an open
//! RFI, except a reinstatement to `RFI_REQUIRED`, which keeps or opens it;
//! (5) an `ACTIVE` identity with an open RFI keeps transacting; (6) data
//! resubmitted while an RFI is open is accepted, keeps the RFI open and
//! emits nothing.
//!
//! Where the reference is silent, the choices are those a compliance
//! operator expects; each is documented on the event it concerns.

use crate::account::AccountStatus;

use super::{State, Status, Step, SubStatus, Type, state::account_status};

/// Everything that can happen to an identity: a client's submission, a
/// compliance provider's decision, or a compliance officer's command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Event {
    /// KYC/KYB data submitted. Starts the compliance checks (rule 1), from
    /// any onboarding step: new data makes an earlier finding, an IDV
    /// requirement included, stale. Submitting again while the checks run
    /// changes nothing visible. While an RFI is open it is accepted and
    /// silent (rule 6) and the RFI still returns to the step it interrupted
    /// (rule 3), except `CREATED`: data has now arrived, so the RFI returns
    /// to the checks rather than to a step that waits for data. Outside
    /// onboarding, data is accepted only to answer an open RFI.
    ComplianceSubmitted,
    /// The checks ask the individual to verify their identity.
    IdvRequired,
    /// A verification check (with its URL) was issued; also issues a new
    /// check after one expired.
    IdvRequested,
    /// The individual opened the verification check.
    IdvStarted,
    /// The individual finished the verification: the checks resume on its
    /// result, and their approval or denial ends onboarding.
    IdvCompleted,
    /// The requested or started verification check expired.
    IdvExpired,
    /// Compliance approved the identity. Refused at `CREATED`, when there is
    /// nothing to approve on; accepted at any later onboarding step, IDV
    /// ones included, since compliance may waive a verification.
    Approved,
    /// KYC/KYB denied, at any onboarding step (compliance may refuse an
    /// identity that never submitted data).
    Denied,
    /// Compliance suspended an `ACTIVE` identity. A pending identity is
    /// denied or asked for information instead.
    Suspended,
    /// Reinstatement of a `SUSPENDED` identity to `ACTIVE`, closing any RFI.
    Reinstated,
    /// Reinstatement of a `SUSPENDED` identity to `ACTIVE` with
    /// `RFI_REQUIRED`, keeping the RFI open or opening one (rule 4); the
    /// identity transacts meanwhile (rule 5).
    ReinstatedWithRfi,
    /// Permanent closure of the identity and all its accounts, from any
    /// state but `TERMINATED` itself.
    Terminated,
    /// Compliance raised a request for information (rule 2). Refused while
    /// one is already open: there is one RFI at a time.
    RfiRaised,
    /// The open RFI is fulfilled (rule 3).
    RfiFulfilled,
}

/// Why an event was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum Reason {
    #[error("the identity is terminated permanently")]
    Terminated,
    #[error("a rejected identity can only be terminated")]
    Rejected,
    #[error("identity verification applies only to individuals")]
    IdvForBusiness,
    #[error("only an identity in onboarding can take this step")]
    NotOnboarding,
    #[error("the onboarding step does not allow this event")]
    OutOfOrder,
    #[error("no compliance data was submitted")]
    NoComplianceData,
    #[error("compliance data is accepted after onboarding only to answer an open rfi")]
    NotRequested,
    #[error("an rfi is already open")]
    RfiOpen,
    #[error("no rfi is open")]
    NoRfi,
    #[error("only an active identity can be suspended")]
    NotActive,
    #[error("only a suspended identity can be reinstated")]
    NotSuspended,
}

/// An event the state machine refused; the state is unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{event:?} refused for {kind} identity in {state}: {reason}")]
pub struct Refusal {
    pub kind: Type,
    pub state: State,
    pub event: Event,
    pub reason: Reason,
}

/// An accepted event: the state before and after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transition {
    pub previous: State,
    pub next: State,
}

impl Event {
    pub const ALL: [Event; 14] = [
        Event::ComplianceSubmitted,
        Event::IdvRequired,
        Event::IdvRequested,
        Event::IdvStarted,
        Event::IdvCompleted,
        Event::IdvExpired,
        Event::Approved,
        Event::Denied,
        Event::Suspended,
        Event::Reinstated,
        Event::ReinstatedWithRfi,
        Event::Terminated,
        Event::RfiRaised,
        Event::RfiFulfilled,
    ];

    pub fn is_idv(self) -> bool {
        matches!(
            self,
            Event::IdvRequired
                | Event::IdvRequested
                | Event::IdvStarted
                | Event::IdvCompleted
                | Event::IdvExpired
        )
    }
}

impl Transition {
    pub fn previous_status(&self) -> Status {
        self.previous.status()
    }

    pub fn previous_sub_status(&self) -> Option<SubStatus> {
        self.previous.sub_status()
    }

    pub fn status(&self) -> Status {
        self.next.status()
    }

    pub fn sub_status(&self) -> Option<SubStatus> {
        self.next.sub_status()
    }

    /// One `identity_status_update` is due exactly when the status or the
    /// sub-status changed; an account status changes only with the status.
    /// A silent step (data resubmitted during an RFI, an IDV check expiring
    /// behind an open RFI) changes neither.
    pub fn emits_event(&self) -> bool {
        (self.previous_status(), self.previous_sub_status()) != (self.status(), self.sub_status())
    }

    pub fn previous_account_status(&self) -> AccountStatus {
        account_status(self.previous_status())
    }

    /// The status every account of the identity has from now on.
    pub fn account_status(&self) -> AccountStatus {
        account_status(self.status())
    }

    pub fn rfi_opened(&self) -> bool {
        !self.previous.rfi_open() && self.next.rfi_open()
    }

    /// Whether an open RFI was closed, by fulfilment or by a change of status.
    pub fn rfi_closed(&self) -> bool {
        self.previous.rfi_open() && !self.next.rfi_open()
    }
}

/// Applies `event` to an identity of type `kind` in `state`.
pub fn apply(kind: Type, state: State, event: Event) -> Result<Transition, Refusal> {
    next(kind, state, event).map(|next| Transition { previous: state, next }).map_err(|reason| Refusal {
        kind,
        state,
        event,
        reason,
    })
}

fn next(kind: Type, state: State, event: Event) -> Result<State, Reason> {
    if state == State::Terminated {
        return Err(Reason::Terminated);
    }
    if (event.is_idv() && kind == Type::Business) || !state.fits(kind) {
        return Err(Reason::IdvForBusiness);
    }
    if state == State::Rejected && event != Event::Terminated {
        return Err(Reason::Rejected);
    }
    match event {
        Event::ComplianceSubmitted => submitted(state),
        Event::IdvRequired
        | Event::IdvRequested
        | Event::IdvStarted
        | Event::IdvCompleted
        | Event::IdvExpired => verification(state, event),
        Event::Approved => approved(state),
        Event::Denied => match state {
            State::Onboarding { .. } => Ok(State::Rejected),
            _ => Err(Reason::NotOnboarding),
        },
        Event::Suspended => match state {
            State::Active { .. } => Ok(State::Suspended { rfi: false }),
            _ => Err(Reason::NotActive),
        },
        Event::Reinstated | Event::ReinstatedWithRfi => match state {
            State::Suspended { .. } => Ok(State::Active { rfi: event == Event::ReinstatedWithRfi }),
            _ => Err(Reason::NotSuspended),
        },
        Event::Terminated => Ok(State::Terminated),
        Event::RfiRaised => rfi(state, true),
        Event::RfiFulfilled => rfi(state, false),
    }
}

fn submitted(state: State) -> Result<State, Reason> {
    match state {
        State::Onboarding { rfi: false, .. } => {
            Ok(State::Onboarding { step: Step::ComplianceChecks, rfi: false })
        }
        State::Onboarding { step: Step::Created, rfi: true } => {
            Ok(State::Onboarding { step: Step::ComplianceChecks, rfi: true })
        }
        _ if state.rfi_open() => Ok(state),
        _ => Err(Reason::NotRequested),
    }
}

/// An IDV step. Behind an open RFI the step the RFI returns to advances
/// silently, so that fulfilment does not return to a stale step (an expired
/// check shown as still in progress).
fn verification(state: State, event: Event) -> Result<State, Reason> {
    let State::Onboarding { step, rfi } = state else {
        return Err(Reason::NotOnboarding);
    };
    let step = match (step, event) {
        (Step::ComplianceChecks, Event::IdvRequired) => Step::IdvRequired,
        (Step::IdvRequired | Step::IdvExpired, Event::IdvRequested) => Step::IdvRequested,
        (Step::IdvRequested, Event::IdvStarted) => Step::IdvInProgress,
        (Step::IdvInProgress, Event::IdvCompleted) => Step::ComplianceChecks,
        (Step::IdvRequested | Step::IdvInProgress, Event::IdvExpired) => Step::IdvExpired,
        _ => return Err(Reason::OutOfOrder),
    };
    Ok(State::Onboarding { step, rfi })
}

fn approved(state: State) -> Result<State, Reason> {
    match state {
        State::Onboarding { step: Step::Created, .. } => Err(Reason::NoComplianceData),
        State::Onboarding { .. } => Ok(State::Active { rfi: false }),
        _ => Err(Reason::NotOnboarding),
    }
}

/// Raises (`open`) or fulfils an RFI, keeping the status and, during
/// onboarding, the step to return to.
fn rfi(state: State, open: bool) -> Result<State, Reason> {
    if state.rfi_open() == open {
        return Err(if open { Reason::RfiOpen } else { Reason::NoRfi });
    }
    match state {
        State::Onboarding { step, .. } => Ok(State::Onboarding { step, rfi: open }),
        State::Active { .. } => Ok(State::Active { rfi: open }),
        State::Suspended { .. } => Ok(State::Suspended { rfi: open }),
        State::Rejected | State::Terminated => Err(Reason::NotOnboarding),
    }
}
