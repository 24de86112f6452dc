//! Every state an identity can be in, built so that an impossible
//! combination (an IDV step on a business, a sub-status on a terminated
//! identity, an RFI that does not know where to return) cannot be written.

use std::fmt;

use crate::account::AccountStatus;

use super::{Status, SubStatus, Type};

/// An onboarding step: the sub-status of a `PENDING_ONBOARDING` identity
/// when no RFI is open, and the step an open RFI returns to when fulfilled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Step {
    Created,
    ComplianceChecks,
    IdvRequired,
    IdvRequested,
    IdvInProgress,
    IdvExpired,
}

/// An identity's lifecycle state.
///
/// `rfi` is whether a request for information is open. While it is, the
/// visible sub-status is `RFI_REQUIRED`; during onboarding `step` keeps the
/// step the RFI interrupted, which fulfilment returns to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    Onboarding { step: Step, rfi: bool },
    Active { rfi: bool },
    Suspended { rfi: bool },
    Rejected,
    Terminated,
}

/// A stored (status, sub-status, RFI return step) triple that no transition
/// can produce.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid {kind} identity state: status {status}, sub-status {sub_status:?}, rfi return step {rfi_step:?}"
)]
pub struct InvalidState {
    pub kind: Type,
    pub status: Status,
    pub sub_status: Option<SubStatus>,
    pub rfi_step: Option<SubStatus>,
}

impl Step {
    pub const ALL: [Step; 6] = [
        Step::Created,
        Step::ComplianceChecks,
        Step::IdvRequired,
        Step::IdvRequested,
        Step::IdvInProgress,
        Step::IdvExpired,
    ];

    pub fn sub_status(self) -> SubStatus {
        match self {
            Step::Created => SubStatus::Created,
            Step::ComplianceChecks => SubStatus::ComplianceChecksInProgress,
            Step::IdvRequired => SubStatus::IdvRequired,
            Step::IdvRequested => SubStatus::IdvRequested,
            Step::IdvInProgress => SubStatus::IdvInProgress,
            Step::IdvExpired => SubStatus::IdvExpired,
        }
    }

    /// The step a sub-status names; `None` for `RFI_REQUIRED`, which is not a step.
    pub fn from_sub_status(sub_status: SubStatus) -> Option<Step> {
        Step::ALL.into_iter().find(|step| step.sub_status() == sub_status)
    }

    pub fn is_idv(self) -> bool {
        self.sub_status().is_idv()
    }
}

impl State {
    /// The state of a newly created identity.
    pub const CREATED: State = State::Onboarding { step: Step::Created, rfi: false };

    pub fn status(self) -> Status {
        match self {
            State::Onboarding { .. } => Status::PendingOnboarding,
            State::Active { .. } => Status::Active,
            State::Suspended { .. } => Status::Suspended,
            State::Rejected => Status::Rejected,
            State::Terminated => Status::Terminated,
        }
    }

    /// The visible sub-status: `RFI_REQUIRED` while an RFI is open, the
    /// onboarding step otherwise, none once onboarding is over.
    pub fn sub_status(self) -> Option<SubStatus> {
        match self {
            _ if self.rfi_open() => Some(SubStatus::RfiRequired),
            State::Onboarding { step, .. } => Some(step.sub_status()),
            _ => None,
        }
    }

    /// The onboarding step an open RFI returns to when fulfilled; stored
    /// next to status and sub-status so that [`State::from_parts`] can
    /// rebuild the state.
    pub fn rfi_step(self) -> Option<SubStatus> {
        match self {
            State::Onboarding { step, rfi: true } => Some(step.sub_status()),
            _ => None,
        }
    }

    pub fn rfi_open(self) -> bool {
        matches!(
            self,
            State::Onboarding { rfi: true, .. }
                | State::Active { rfi: true }
                | State::Suspended { rfi: true }
        )
    }

    /// Whether the identity's accounts may send: only an `ACTIVE` identity's,
    /// open RFI or not (an `ACTIVE` identity with an open RFI keeps
    /// transacting). Deposits are recorded whatever the state.
    pub fn can_transact(self) -> bool {
        matches!(self, State::Active { .. })
    }

    /// Whether the identity may open accounts: all but `REJECTED` and
    /// `TERMINATED`. A pending identity's accounts receive but cannot send
    /// until it is `ACTIVE`; a suspended identity's new accounts are `FROZEN`.
    pub fn may_open_accounts(self) -> bool {
        !matches!(self, State::Rejected | State::Terminated)
    }

    /// The status every account of the identity has.
    pub fn account_status(self) -> AccountStatus {
        account_status(self.status())
    }

    /// Whether the state is possible for an identity of this type: a
    /// business never has an IDV step.
    pub fn fits(self, kind: Type) -> bool {
        match self {
            State::Onboarding { step, .. } => kind == Type::Individual || !step.is_idv(),
            _ => true,
        }
    }

    /// Rebuilds a stored state, refusing any combination no transition yields.
    pub fn from_parts(
        kind: Type,
        status: Status,
        sub_status: Option<SubStatus>,
        rfi_step: Option<SubStatus>,
    ) -> Result<State, InvalidState> {
        let invalid = InvalidState { kind, status, sub_status, rfi_step };
        let rfi = sub_status == Some(SubStatus::RfiRequired);
        let state = match (status, sub_status, rfi_step) {
            (Status::PendingOnboarding, Some(SubStatus::RfiRequired), Some(step)) => {
                State::Onboarding { step: Step::from_sub_status(step).ok_or(invalid.clone())?, rfi: true }
            }
            (Status::PendingOnboarding, Some(sub), None) => {
                State::Onboarding { step: Step::from_sub_status(sub).ok_or(invalid.clone())?, rfi: false }
            }
            (Status::Active, None | Some(SubStatus::RfiRequired), None) => State::Active { rfi },
            (Status::Suspended, None | Some(SubStatus::RfiRequired), None) => State::Suspended { rfi },
            (Status::Rejected, None, None) => State::Rejected,
            (Status::Terminated, None, None) => State::Terminated,
            _ => return Err(invalid),
        };
        if state.fits(kind) { Ok(state) } else { Err(invalid) }
    }
}

/// `STATUS` or `STATUS/SUB_STATUS`, as an operator reads it in a refusal.
impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.sub_status() {
            Some(sub_status) => write!(f, "{}/{sub_status}", self.status()),
            None => write!(f, "{}", self.status()),
        }
    }
}

/// An account's status follows its identity's: `FROZEN` while `SUSPENDED`,
/// `CLOSED` once `TERMINATED` (permanently, since nothing leaves
/// `TERMINATED`), `ACTIVE` otherwise. A pending or rejected identity's
/// accounts stay `ACTIVE` as the reference derives it; that they cannot send
/// is [`State::can_transact`]'s answer, not the account status's.
pub fn account_status(status: Status) -> AccountStatus {
    match status {
        Status::Suspended => AccountStatus::Frozen,
        Status::Terminated => AccountStatus::Closed,
        Status::PendingOnboarding | Status::Active | Status::Rejected => AccountStatus::Active,
    }
}
