//! What the API knows of the process serving it: whether it is stopping,
//! the leases it holds (a stopping listener answers until they are given
//! up), and the gate a detected restore closes on transfers.

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use super::ApiState;

impl ApiState {
    /// The state whose stopping listener waits for `held` (this process's
    /// leases) to reach 0 before it closes.
    pub fn with_leases(mut self, held: Arc<AtomicUsize>) -> Self {
        Arc::get_mut(&mut self.0).expect("configured before it is shared").leases = Some(held);
        self
    }

    /// The state whose transfers wait on `gate` (see [`crate::restore`]).
    pub fn with_gate(mut self, gate: crate::restore::gate::Gate) -> Self {
        Arc::get_mut(&mut self.0).expect("configured before it is shared").gate = gate;
        self
    }

    /// The gate a detected restore closes.
    pub fn gate(&self) -> &crate::restore::gate::Gate {
        &self.0.gate
    }

    /// Whether the process is stopping (see [`crate::server::serve`]).
    pub fn draining(&self) -> bool {
        self.0.draining.load(Ordering::SeqCst)
    }

    /// Marks the process stopping.
    pub fn drain(&self) {
        self.0.draining.store(true, Ordering::SeqCst);
    }

    /// How many leases the process holds, when it knows (`run`).
    pub fn leases_held(&self) -> Option<usize> {
        self.0.leases.as_ref().map(|held| held.load(Ordering::SeqCst))
    }
}
