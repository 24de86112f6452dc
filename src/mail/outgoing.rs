//! A queued message as the store holds it: a model type.

/// A queued message as the store holds it.
pub struct Outgoing {
    pub id: String,
    pub to: String,
    pub subject: String,
    /// The body, sealed under the store's personal-data key.
    pub sealed_body: String,
    /// Tries so far, this one included once claimed.
    pub attempts: i64,
}

impl std::fmt::Debug for Outgoing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outgoing")
            .field("id", &self.id)
            .field("attempts", &self.attempts)
            .finish_non_exhaustive()
    }
}
