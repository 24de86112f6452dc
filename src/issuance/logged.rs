//! Whether each mint's people are in the audit log: the operator who
//! recorded its wire (`wire.recorded`, or for an on-ramp's mint its
//! conversion's `conversion.wire_recorded`) and the one who approved it
//! (`wire.approved`), each by the actor the mint's row names, and in
//! `production` an approval for every mint that was sent to the chain (every
//! mint waits for one there). A mint row written or changed with plain SQL
//! names steps the log does not hold, and `issuance reconcile` says so.

use super::{rows::MintSteps, state::Status};
use crate::{
    chain::Chain,
    store::{Store, StoreError, Tx, audit as log},
};

/// What the log holds of a mint: the actors of its first `wire.recorded`
/// and `wire.approved` entries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Logged {
    pub recorded: Option<String>,
    pub approved: Option<String>,
}

/// Whether a row's actor (`Actor::recorded`) is the log's (`Actor`'s
/// text): the same, or a command's `--by` name (`by:<name>`), which the log
/// records as the command's process user (`local:<user>`).
fn same(row: &str, logged: Option<&String>) -> bool {
    logged.is_some_and(|logged| row == logged || (row.starts_with("by:") && logged.starts_with("local:")))
}

/// Whether the recording of mint `mint_id`'s wire by `recorder` (the row's
/// `recorded_by`) is an entry the log takes as authority for a decision
/// (see [`crate::store::keyring::Authority`]): one written with plain SQL,
/// or before the log was authenticated, is not, and the wire is recorded
/// again.
pub async fn recording_held(tx: &mut Tx, mint_id: &str, recorder: &str) -> Result<bool, StoreError> {
    let recorded = match crate::store::mint_transfers::conversion_of(tx, mint_id).await? {
        Some(conversion) => log::entry_about(tx, "conversion.wire_recorded", &conversion).await?,
        None => log::entry_about(tx, "wire.recorded", mint_id).await?,
    };
    Ok(same(recorder, recorded.map(|e| e.actor).as_ref()))
}

/// Why `mint`'s steps are not those of the log, if they are not. Pure.
pub fn missing(mint: &MintSteps, logged: &Logged, production: bool) -> Option<String> {
    if let Some(by) = &mint.recorded_by
        && !same(by, logged.recorded.as_ref())
    {
        return Some(format!("its wire's recording by {by} is not in the audit log"));
    }
    if let Some(by) = &mint.approved_by
        && !same(by, logged.approved.as_ref())
    {
        return Some(format!("its approval by {by} is not in the audit log"));
    }
    let sent = matches!(mint.status, Status::Minting | Status::Minted | Status::Completed);
    if production && sent && mint.approved_by.is_none() {
        return Some("it was sent to the chain without an approval".into());
    }
    None
}

/// The mints (of `chain`, if given) whose steps are not in the log, each
/// with why.
pub async fn unlogged(store: &Store, chain: Option<Chain>) -> Result<Vec<(MintSteps, String)>, StoreError> {
    let production = store.environment().await? != Some(crate::environment::Environment::Sandbox);
    let mut tx = store.begin().await?;
    let mut found = Vec::new();
    for mint in crate::store::mint_transfers::mint_steps(&mut tx, chain).await? {
        let actor = |entry: Option<crate::audit::chain::Entry>| entry.map(|e| e.actor);
        let recorded = match &mint.conversion {
            Some(conversion) => {
                log::logged_entry_about(&mut tx, "conversion.wire_recorded", conversion).await?
            }
            None => log::logged_entry_about(&mut tx, "wire.recorded", &mint.id).await?,
        };
        let logged = Logged {
            recorded: actor(recorded),
            approved: actor(log::logged_entry_about(&mut tx, "wire.approved", &mint.id).await?),
        };
        if let Some(why) = missing(&mint, &logged, production) {
            found.push((mint, why));
        }
    }
    tx.rollback().await?;
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mint(status: Status, recorded_by: Option<&str>, approved_by: Option<&str>) -> MintSteps {
        MintSteps {
            id: "m1".into(),
            chain: Chain::EthereumTestnet,
            symbol: "USDC".into(),
            status,
            recorded_by: recorded_by.map(str::to_string),
            approved_by: approved_by.map(str::to_string),
            conversion: None,
        }
    }

    #[test]
    fn a_mint_is_flagged_when_its_row_names_steps_the_log_does_not_hold() {
        let (tom, tess) = (Some("operator:op_tom"), Some("operator:op_tess"));
        let both = Logged { recorded: tom.map(str::to_string), approved: tess.map(str::to_string) };
        let recorded_only = Logged { recorded: tom.map(str::to_string), approved: None };
        let by_name = Logged { recorded: Some("local:ops".into()), approved: Some("local:ops".into()) };
        let table: [(MintSteps, Logged, bool, Option<&str>); 11] = [
            (mint(Status::Completed, tom, tess), both.clone(), true, None),
            // A command's `--by` (sandbox) is its process user in the log.
            (mint(Status::Completed, Some("by:tom"), Some("by:tess")), by_name, false, None),
            (
                mint(Status::Completed, Some("by:tom"), None),
                Logged::default(),
                false,
                Some("recording by by:tom"),
            ),
            (mint(Status::AwaitingApproval, tom, None), recorded_only.clone(), true, None),
            // A recorder or approver the log does not name.
            (
                mint(Status::Completed, tom, tess),
                recorded_only.clone(),
                true,
                Some("approval by operator:op_tess"),
            ),
            (mint(Status::Completed, tom, tom), both.clone(), true, Some("approval by operator:op_tom")),
            (mint(Status::AwaitingApproval, tess, None), recorded_only.clone(), true, Some("recording by")),
            // Sent to the chain with no approval at all: production only.
            (mint(Status::Minting, None, None), Logged::default(), true, Some("without an approval")),
            (mint(Status::Minted, None, None), Logged::default(), false, None),
            // Not sent: nothing to approve yet; refused or failed before.
            (mint(Status::Received, None, None), Logged::default(), true, None),
            (mint(Status::Failed, None, None), Logged::default(), true, None),
        ];
        for (row, logged, production, expected) in table {
            let found = missing(&row, &logged, production);
            match expected {
                None => assert_eq!(found, None, "{row:?} {logged:?}"),
                Some(part) => {
                    assert!(found.as_deref().is_some_and(|f| f.contains(part)), "{row:?}: {found:?}")
                }
            }
        }
    }
}
