//! Four eyes on grants, as the log shows them. Once genesis has ended, an
//! operator is made, enabled or given a role only by applying a change
//! that another admin than its proposer approved: the grant's entry names
//! the change (`change_id` in its detail), after the change's
//! `operator_change.approved` entry, and each approval applies once. Only
//! entries after the log's authentication are held to it: older ones
//! carry no change id, and the principals digest of the authentication is
//! their review.

use std::collections::{HashMap, HashSet};

use super::super::chain::Entry;

/// The approvals the log holds so far, replayed entry by entry.
#[derive(Debug, Clone, Default)]
pub(super) struct Approvals {
    /// Grants after this entry are held to four eyes; `None`: none are.
    after: Option<i64>,
    genesis_ended: bool,
    /// Each proposed change's proposer (the entry's actor).
    proposers: HashMap<String, String>,
    /// Changes approved by another than their proposer, not yet applied.
    approved: HashSet<String>,
}

impl Approvals {
    /// Grants in entries after `seq` are held to four eyes.
    pub(super) fn after(seq: i64) -> Self {
        Self { after: Some(seq), ..Self::default() }
    }

    /// Takes `entry` into account (entries in `seq` order).
    pub(super) fn read(&mut self, entry: &Entry) {
        let change = entry.target_id.clone();
        match entry.action.as_str() {
            "operator.genesis_ended" => self.genesis_ended = true,
            "operator_change.proposed" => {
                self.proposers.insert(change, entry.actor.clone());
            }
            "operator_change.approved"
                if self.proposers.get(&change).is_some_and(|proposer| *proposer != entry.actor) =>
            {
                self.approved.insert(change);
            }
            _ => {}
        }
    }

    /// Whether the grant in `entry`, naming `change_id`, is approved as it
    /// must be: always before genesis ended or before the authentication;
    /// after both, only applying a change approved by another admin than
    /// its proposer, whose approval it uses up.
    pub(super) fn grant(&mut self, entry: &Entry, change_id: Option<&str>) -> bool {
        let held = self.genesis_ended && self.after.is_some_and(|after| entry.seq > after);
        !held || change_id.is_some_and(|id| self.approved.remove(id))
    }
}

/// What a grant that broke the rule is named by.
pub(super) fn unapproved(entry: &Entry) -> String {
    format!("audit entry {} ({}) applies no change another admin approved", entry.seq, entry.action)
}
