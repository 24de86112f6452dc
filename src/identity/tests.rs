//! The whole product of states × events, allowed and refused, as a table,
//! and the six sub-status rules one by one.

use super::*;
use crate::account::AccountStatus;

/// State codes: `CR` created, `CK` compliance checks in progress, `IQ` IDV
/// required, `IR` IDV requested, `IP` IDV in progress, `IX` IDV expired,
/// `AC` active, `SU` suspended, `RJ` rejected, `TM` terminated; `/R` adds an
/// open RFI (on an onboarding step: the step it returns to).
fn state(code: &str) -> State {
    let (base, rfi) = code.strip_suffix("/R").map_or((code, false), |base| (base, true));
    let step = |step| State::Onboarding { step, rfi };
    match base {
        "CR" => step(Step::Created),
        "CK" => step(Step::ComplianceChecks),
        "IQ" => step(Step::IdvRequired),
        "IR" => step(Step::IdvRequested),
        "IP" => step(Step::IdvInProgress),
        "IX" => step(Step::IdvExpired),
        "AC" => State::Active { rfi },
        "SU" => State::Suspended { rfi },
        "RJ" if !rfi => State::Rejected,
        "TM" if !rfi => State::Terminated,
        _ => panic!("unknown state code {code}"),
    }
}

fn reason(code: &str) -> Reason {
    match code {
        "term" => Reason::Terminated,
        "rej" => Reason::Rejected,
        "biz" => Reason::IdvForBusiness,
        "onb" => Reason::NotOnboarding,
        "order" => Reason::OutOfOrder,
        "data" => Reason::NoComplianceData,
        "req" => Reason::NotRequested,
        "open" => Reason::RfiOpen,
        "norfi" => Reason::NoRfi,
        "act" => Reason::NotActive,
        "susp" => Reason::NotSuspended,
        _ => panic!("unknown reason code {code}"),
    }
}

/// Columns, in the order of [`Event::ALL`]: submit, IDV required, IDV
/// requested, IDV started, IDV completed, IDV expired, approve, deny,
/// suspend, reinstate, reinstate to RFI, terminate, raise RFI, fulfil RFI.
/// A cell is the state reached with one `identity_status_update`, `=` before
/// it when the step is accepted silently, or `!` and the refusal's reason.
#[rustfmt::skip]
const INDIVIDUAL: &[(&str, [&str; 14])] = &[
    //         submit    idv_req   idv_ask   idv_go    idv_done  idv_exp   approve   deny      suspend   reinst    rein_rfi  term      rfi       fulfil
    ("CR",   ["CK",     "!order", "!order", "!order", "!order", "!order", "!data",  "RJ",     "!act",   "!susp",  "!susp",  "TM",     "CR/R",   "!norfi"]),
    ("CK",   ["=CK",    "IQ",     "!order", "!order", "!order", "!order", "AC",     "RJ",     "!act",   "!susp",  "!susp",  "TM",     "CK/R",   "!norfi"]),
    ("IQ",   ["CK",     "!order", "IR",     "!order", "!order", "!order", "AC",     "RJ",     "!act",   "!susp",  "!susp",  "TM",     "IQ/R",   "!norfi"]),
    ("IR",   ["CK",     "!order", "!order", "IP",     "!order", "IX",     "AC",     "RJ",     "!act",   "!susp",  "!susp",  "TM",     "IR/R",   "!norfi"]),
    ("IP",   ["CK",     "!order", "!order", "!order", "CK",     "IX",     "AC",     "RJ",     "!act",   "!susp",  "!susp",  "TM",     "IP/R",   "!norfi"]),
    ("IX",   ["CK",     "!order", "IR",     "!order", "!order", "!order", "AC",     "RJ",     "!act",   "!susp",  "!susp",  "TM",     "IX/R",   "!norfi"]),
    ("CR/R", ["=CK/R",  "!order", "!order", "!order", "!order", "!order", "!data",  "RJ",     "!act",   "!susp",  "!susp",  "TM",     "!open",  "CR"]),
    ("CK/R", ["=CK/R",  "=IQ/R",  "!order", "!order", "!order", "!order", "AC",     "RJ",     "!act",   "!susp",  "!susp",  "TM",     "!open",  "CK"]),
    ("IQ/R", ["=IQ/R",  "!order", "=IR/R",  "!order", "!order", "!order", "AC",     "RJ",     "!act",   "!susp",  "!susp",  "TM",     "!open",  "IQ"]),
    ("IR/R", ["=IR/R",  "!order", "!order", "=IP/R",  "!order", "=IX/R",  "AC",     "RJ",     "!act",   "!susp",  "!susp",  "TM",     "!open",  "IR"]),
    ("IP/R", ["=IP/R",  "!order", "!order", "!order", "=CK/R",  "=IX/R",  "AC",     "RJ",     "!act",   "!susp",  "!susp",  "TM",     "!open",  "IP"]),
    ("IX/R", ["=IX/R",  "!order", "=IR/R",  "!order", "!order", "!order", "AC",     "RJ",     "!act",   "!susp",  "!susp",  "TM",     "!open",  "IX"]),
    ("AC",   ["!req",   "!onb",   "!onb",   "!onb",   "!onb",   "!onb",   "!onb",   "!onb",   "SU",     "!susp",  "!susp",  "TM",     "AC/R",   "!norfi"]),
    ("AC/R", ["=AC/R",  "!onb",   "!onb",   "!onb",   "!onb",   "!onb",   "!onb",   "!onb",   "SU",     "!susp",  "!susp",  "TM",     "!open",  "AC"]),
    ("SU",   ["!req",   "!onb",   "!onb",   "!onb",   "!onb",   "!onb",   "!onb",   "!onb",   "!act",   "AC",     "AC/R",   "TM",     "SU/R",   "!norfi"]),
    ("SU/R", ["=SU/R",  "!onb",   "!onb",   "!onb",   "!onb",   "!onb",   "!onb",   "!onb",   "!act",   "AC",     "AC/R",   "TM",     "!open",  "SU"]),
    ("RJ",   ["!rej",   "!rej",   "!rej",   "!rej",   "!rej",   "!rej",   "!rej",   "!rej",   "!rej",   "!rej",   "!rej",   "TM",     "!rej",   "!rej"]),
    ("TM",   ["!term",  "!term",  "!term",  "!term",  "!term",  "!term",  "!term",  "!term",  "!term",  "!term",  "!term",  "!term",  "!term",  "!term"]),
];

/// The same columns for a business, which has no IDV steps.
#[rustfmt::skip]
const BUSINESS: &[(&str, [&str; 14])] = &[
    //         submit    idv_req   idv_ask   idv_go    idv_done  idv_exp   approve   deny      suspend   reinst    rein_rfi  term      rfi       fulfil
    ("CR",   ["CK",     "!biz",   "!biz",   "!biz",   "!biz",   "!biz",   "!data",  "RJ",     "!act",   "!susp",  "!susp",  "TM",     "CR/R",   "!norfi"]),
    ("CK",   ["=CK",    "!biz",   "!biz",   "!biz",   "!biz",   "!biz",   "AC",     "RJ",     "!act",   "!susp",  "!susp",  "TM",     "CK/R",   "!norfi"]),
    ("CR/R", ["=CK/R",  "!biz",   "!biz",   "!biz",   "!biz",   "!biz",   "!data",  "RJ",     "!act",   "!susp",  "!susp",  "TM",     "!open",  "CR"]),
    ("CK/R", ["=CK/R",  "!biz",   "!biz",   "!biz",   "!biz",   "!biz",   "AC",     "RJ",     "!act",   "!susp",  "!susp",  "TM",     "!open",  "CK"]),
    ("AC",   ["!req",   "!biz",   "!biz",   "!biz",   "!biz",   "!biz",   "!onb",   "!onb",   "SU",     "!susp",  "!susp",  "TM",     "AC/R",   "!norfi"]),
    ("AC/R", ["=AC/R",  "!biz",   "!biz",   "!biz",   "!biz",   "!biz",   "!onb",   "!onb",   "SU",     "!susp",  "!susp",  "TM",     "!open",  "AC"]),
    ("SU",   ["!req",   "!biz",   "!biz",   "!biz",   "!biz",   "!biz",   "!onb",   "!onb",   "!act",   "AC",     "AC/R",   "TM",     "SU/R",   "!norfi"]),
    ("SU/R", ["=SU/R",  "!biz",   "!biz",   "!biz",   "!biz",   "!biz",   "!onb",   "!onb",   "!act",   "AC",     "AC/R",   "TM",     "!open",  "SU"]),
    ("RJ",   ["!rej",   "!biz",   "!biz",   "!biz",   "!biz",   "!biz",   "!rej",   "!rej",   "!rej",   "!rej",   "!rej",   "TM",     "!rej",   "!rej"]),
    ("TM",   ["!term",  "!term",  "!term",  "!term",  "!term",  "!term",  "!term",  "!term",  "!term",  "!term",  "!term",  "!term",  "!term",  "!term"]),
];

/// Every state an identity of `kind` can be in.
fn all_states(kind: Type) -> Vec<State> {
    let mut states = Vec::new();
    for rfi in [false, true] {
        states.extend(Step::ALL.map(|step| State::Onboarding { step, rfi }));
        states.extend([State::Active { rfi }, State::Suspended { rfi }]);
    }
    states.extend([State::Rejected, State::Terminated]);
    states.retain(|state| state.fits(kind));
    states
}

fn check_table(kind: Type, table: &[(&str, [&str; 14])]) {
    let mut rows: Vec<State> = table.iter().map(|(code, _)| state(code)).collect();
    let mut expected = all_states(kind);
    rows.sort_by_key(|state| format!("{state:?}"));
    expected.sort_by_key(|state| format!("{state:?}"));
    assert_eq!(rows, expected, "the {kind} table must have one row per state");
    for (code, cells) in table {
        for (event, cell) in Event::ALL.into_iter().zip(cells) {
            let from = state(code);
            let got = apply(kind, from, event);
            let at = format!("{kind} {code} on {event:?}");
            if let Some(refused) = cell.strip_prefix('!') {
                let refusal = got.expect_err(&format!("{at} must be refused"));
                assert_eq!(refusal.reason, reason(refused), "{at}");
                assert_eq!((refusal.state, refusal.event), (from, event), "{at}");
                continue;
            }
            let (quiet, target) = cell.strip_prefix('=').map_or((false, *cell), |target| (true, target));
            let transition = got.unwrap_or_else(|refusal| panic!("{at} must be accepted: {refusal}"));
            assert_eq!(transition.next, state(target), "{at}");
            assert_eq!(transition.previous, from, "{at}");
            assert_eq!(transition.emits_event(), !quiet, "{at}: event emitted");
        }
    }
}

#[test]
fn every_individual_transition_is_allowed_or_refused_as_the_table_says() {
    check_table(Type::Individual, INDIVIDUAL);
}

#[test]
fn every_business_transition_is_allowed_or_refused_as_the_table_says() {
    check_table(Type::Business, BUSINESS);
}

#[test]
fn rule_1_submitting_data_starts_the_checks() {
    let t = apply(Type::Individual, State::CREATED, Event::ComplianceSubmitted).unwrap();
    assert_eq!(t.previous_sub_status(), Some(SubStatus::Created));
    assert_eq!(t.sub_status(), Some(SubStatus::ComplianceChecksInProgress));
    assert_eq!(t.status(), Status::PendingOnboarding);
    assert!(t.emits_event());
}

#[test]
fn rule_2_an_rfi_can_be_raised_at_every_onboarding_step_and_when_active_or_suspended() {
    let mut from: Vec<State> = Step::ALL.map(|step| State::Onboarding { step, rfi: false }).into();
    from.extend([State::Active { rfi: false }, State::Suspended { rfi: false }]);
    for state in from {
        let t = apply(Type::Individual, state, Event::RfiRaised).unwrap();
        assert_eq!(t.status(), state.status(), "{state:?}");
        assert_eq!(t.sub_status(), Some(SubStatus::RfiRequired), "{state:?}");
        assert!(t.emits_event() && t.rfi_opened(), "{state:?}");
    }
    for state in [State::Rejected, State::Terminated] {
        assert!(apply(Type::Individual, state, Event::RfiRaised).is_err(), "{state:?}");
    }
}

#[test]
fn rule_3_fulfilment_returns_to_the_interrupted_step_or_clears_the_sub_status() {
    for step in Step::ALL {
        let open = apply(Type::Individual, State::Onboarding { step, rfi: false }, Event::RfiRaised).unwrap();
        let t = apply(Type::Individual, open.next, Event::RfiFulfilled).unwrap();
        assert_eq!(t.previous_sub_status(), Some(SubStatus::RfiRequired));
        assert_eq!(t.sub_status(), Some(step.sub_status()), "returns to {step:?}");
        assert!(t.emits_event() && t.rfi_closed());
    }
    for (open, status) in
        [(State::Active { rfi: true }, Status::Active), (State::Suspended { rfi: true }, Status::Suspended)]
    {
        let t = apply(Type::Individual, open, Event::RfiFulfilled).unwrap();
        assert_eq!((t.status(), t.sub_status()), (status, None));
    }
}

#[test]
fn rule_4_a_change_of_status_closes_the_rfi_except_a_reinstatement_to_rfi_required() {
    let closing = [
        (State::Onboarding { step: Step::IdvInProgress, rfi: true }, Event::Approved, Status::Active),
        (State::Onboarding { step: Step::Created, rfi: true }, Event::Denied, Status::Rejected),
        (State::Active { rfi: true }, Event::Suspended, Status::Suspended),
        (State::Suspended { rfi: true }, Event::Reinstated, Status::Active),
        (State::Active { rfi: true }, Event::Terminated, Status::Terminated),
    ];
    for (from, event, status) in closing {
        let t = apply(Type::Individual, from, event).unwrap();
        assert_eq!((t.status(), t.sub_status()), (status, None), "{from:?} on {event:?}");
        assert!(t.rfi_closed() && t.emits_event(), "{from:?} on {event:?}");
    }
    let kept = apply(Type::Individual, State::Suspended { rfi: true }, Event::ReinstatedWithRfi).unwrap();
    assert_eq!((kept.status(), kept.sub_status()), (Status::Active, Some(SubStatus::RfiRequired)));
    assert!(!kept.rfi_closed() && kept.next.rfi_open());
    let opened = apply(Type::Individual, State::Suspended { rfi: false }, Event::ReinstatedWithRfi).unwrap();
    assert!(opened.rfi_opened());
    assert_eq!(opened.previous_sub_status(), None);
}

#[test]
fn rule_5_an_active_identity_with_an_open_rfi_keeps_transacting() {
    assert!(State::Active { rfi: true }.can_transact());
    assert_eq!(State::Active { rfi: true }.account_status(), AccountStatus::Active);
    let pending = all_states(Type::Individual).into_iter().filter(|s| s.status() != Status::Active);
    for state in pending {
        assert!(!state.can_transact(), "{state:?} must not send");
    }
}

#[test]
fn rule_6_data_resubmitted_during_an_rfi_is_accepted_silently_and_keeps_it_open() {
    let open = all_states(Type::Individual).into_iter().filter(|state| state.rfi_open());
    for state in open {
        let t = apply(Type::Individual, state, Event::ComplianceSubmitted).unwrap();
        assert!(!t.emits_event(), "{state:?}");
        assert!(t.next.rfi_open(), "{state:?}");
        assert_eq!(t.sub_status(), Some(SubStatus::RfiRequired));
    }
}

#[test]
fn account_status_follows_the_identity_and_closed_is_permanent() {
    let active = State::Active { rfi: false };
    let suspend = apply(Type::Business, active, Event::Suspended).unwrap();
    assert_eq!(
        (suspend.previous_account_status(), suspend.account_status()),
        (AccountStatus::Active, AccountStatus::Frozen)
    );
    let terminate = apply(Type::Business, suspend.next, Event::Terminated).unwrap();
    assert_eq!(terminate.account_status(), AccountStatus::Closed);
    for event in Event::ALL {
        let refusal = apply(Type::Business, State::Terminated, event).unwrap_err();
        assert_eq!(refusal.reason, Reason::Terminated);
    }
    let refusal = apply(Type::Business, State::Terminated, Event::Reinstated).unwrap_err();
    assert_eq!(
        refusal.to_string(),
        "Reinstated refused for BUSINESS identity in TERMINATED: the identity is terminated permanently"
    );
}

#[test]
fn only_rejected_and_terminated_identities_cannot_open_accounts() {
    for state in all_states(Type::Individual) {
        let refused = matches!(state.status(), Status::Rejected | Status::Terminated);
        assert_eq!(state.may_open_accounts(), !refused, "{state:?}");
    }
}

#[test]
fn an_individual_goes_through_idv_and_an_rfi_back_to_where_it_was() {
    let steps = [
        (Event::ComplianceSubmitted, "CREATED", "COMPLIANCE_CHECKS_IN_PROGRESS"),
        (Event::IdvRequired, "COMPLIANCE_CHECKS_IN_PROGRESS", "IDV_REQUIRED"),
        (Event::IdvRequested, "IDV_REQUIRED", "IDV_REQUESTED"),
        (Event::RfiRaised, "IDV_REQUESTED", "RFI_REQUIRED"),
        (Event::IdvStarted, "RFI_REQUIRED", "RFI_REQUIRED"),
        (Event::ComplianceSubmitted, "RFI_REQUIRED", "RFI_REQUIRED"),
        (Event::RfiFulfilled, "RFI_REQUIRED", "IDV_IN_PROGRESS"),
        (Event::IdvCompleted, "IDV_IN_PROGRESS", "COMPLIANCE_CHECKS_IN_PROGRESS"),
        (Event::Approved, "COMPLIANCE_CHECKS_IN_PROGRESS", ""),
    ];
    let mut state = State::CREATED;
    let mut emitted = 0;
    for (event, previous, next) in steps {
        let t = apply(Type::Individual, state, event).unwrap();
        assert_eq!(sub_status_str(t.previous_sub_status()), previous, "{event:?}");
        assert_eq!(sub_status_str(t.sub_status()), next, "{event:?}");
        emitted += usize::from(t.emits_event());
        state = t.next;
    }
    assert_eq!(state, State::Active { rfi: false });
    assert_eq!(emitted, 7, "no event for the IDV start and the resubmission behind the rfi");
}

#[test]
fn stored_parts_rebuild_every_state_and_nothing_else() {
    for kind in Type::ALL.iter().copied() {
        for state in all_states(kind) {
            let parts = (state.status(), state.sub_status(), state.rfi_step());
            assert_eq!(State::from_parts(kind, parts.0, parts.1, parts.2), Ok(state), "{kind} {state:?}");
        }
    }
    let invalid = [
        (Type::Business, Status::PendingOnboarding, Some(SubStatus::IdvRequired), None),
        (Type::Individual, Status::PendingOnboarding, None, None),
        (Type::Individual, Status::PendingOnboarding, Some(SubStatus::RfiRequired), None),
        (
            Type::Individual,
            Status::PendingOnboarding,
            Some(SubStatus::RfiRequired),
            Some(SubStatus::RfiRequired),
        ),
        (Type::Individual, Status::Active, Some(SubStatus::Created), None),
        (Type::Individual, Status::Active, Some(SubStatus::RfiRequired), Some(SubStatus::Created)),
        (Type::Individual, Status::Terminated, Some(SubStatus::RfiRequired), None),
        (Type::Individual, Status::Rejected, Some(SubStatus::RfiRequired), None),
    ];
    for (kind, status, sub_status, rfi_step) in invalid {
        assert!(State::from_parts(kind, status, sub_status, rfi_step).is_err(), "{status} {sub_status:?}");
    }
}

#[test]
fn names_match_serde_and_parse_back() {
    fn check<T>(values: &[T])
    where
        T: Copy + std::fmt::Debug + PartialEq + serde::Serialize + std::str::FromStr + std::fmt::Display,
    {
        for value in values {
            let name = value.to_string();
            assert_eq!(serde_json::to_value(value).unwrap(), serde_json::Value::String(name.clone()));
            assert!(matches!(name.to_ascii_lowercase().parse::<T>(), Ok(parsed) if parsed == *value));
        }
    }
    check(Type::ALL);
    check(Status::ALL);
    check(SubStatus::ALL);
    assert_eq!(SubStatus::ALL[1].as_str(), "COMPLIANCE_CHECKS_IN_PROGRESS");
    assert!(matches!(SubStatus::parse_optional(""), Ok(None)));
    assert_eq!(State::Active { rfi: true }.to_string(), "ACTIVE/RFI_REQUIRED");
    assert!("FROZEN".parse::<Status>().unwrap_err().to_string().contains("PENDING_ONBOARDING"));
    assert!("ONCHAIN".parse::<Type>().is_err());
}
