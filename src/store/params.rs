//! Bind parameters of the deposit path's multi-row statements, named as the
//! connection's database reads them fastest.
//!
//! PostgreSQL numbers its parameters (`$1`, `$2`, …). SQLite finds a
//! numbered parameter's position by scanning the statement's list of
//! parameter names, so a statement of `n` numbered parameters costs `n²` to
//! bind: at 500 that took a sixth of a backfill. Anonymous parameters (`?`)
//! are bound by position with no name to look up, so on SQLite the deposit
//! path uses them, in bind order, and writes a range's thousands of rows in
//! a few large statements instead of a hundred small ones.

use sqlx::{Any, Transaction};

use super::Backend;

/// Parameters per statement where they are numbered (PostgreSQL, and SQLite
/// statements written with `$N`): small enough for SQLite's quadratic lookup.
pub(super) const NUMBERED: usize = 200;

/// Rows per statement where they go as column arrays (see
/// [`Params::arrays`]).
pub(super) const ARRAY_ROWS: usize = 1_000;

/// Parameters per statement on SQLite with anonymous parameters: well under
/// its limit of 32,766, large enough that a range's rows take a few
/// statements.
const ANONYMOUS: usize = 4_000;

/// Names the parameters of one statement, in the order they are bound.
pub(super) struct Params {
    anonymous: bool,
    next: usize,
}

impl Params {
    /// For statements on `tx`'s connection.
    pub(super) fn of(tx: &mut Transaction<'static, Any>) -> Self {
        let anonymous = Backend::of(tx) == Backend::Sqlite;
        Self { anonymous, next: 1 }
    }

    /// Whether a multi-row statement takes its rows as column arrays
    /// (PostgreSQL; see the `arrays` module): one parameter a column and one
    /// plan for a thousand rows, where bound rows cost a round trip and a
    /// plan's execution per few rows.
    pub(super) fn arrays(&self) -> bool {
        !self.anonymous
    }

    /// How many rows of `columns` parameters one statement takes.
    pub(super) fn rows_per_statement(&self, columns: usize) -> usize {
        (if self.anonymous { ANONYMOUS } else { NUMBERED } / columns).max(1)
    }

    /// Starts a new statement: numbering restarts at `$1`.
    pub(super) fn restart(&mut self) -> &mut Self {
        self.next = 1;
        self
    }

    /// The next `count` parameters, comma-separated. Each is bound once, in
    /// this order: a value used twice is bound twice.
    pub(super) fn take(&mut self, count: usize) -> String {
        let names: Vec<String> = (self.next..self.next + count)
            .map(|i| if self.anonymous { "?".to_string() } else { format!("${i}") })
            .collect();
        self.next += count;
        names.join(", ")
    }

    /// `(…)` of the next `count` parameters: one row of a `VALUES` list.
    pub(super) fn row(&mut self, count: usize) -> String {
        format!("({})", self.take(count))
    }
}

/// Whether a multi-row statement of `rows` rows, at most `size` a statement,
/// is kept prepared on its connection: a full one recurs, while a range's
/// last, shorter one has a row count of its own and would only fill the
/// connection's statement cache (its plan holds every row's parameters).
pub(super) fn recurs(rows: usize, size: usize) -> bool {
    rows == size
}

/// Parameters per multi-row statement written with numbered parameters (a
/// statement of `n` columns takes `CHUNK / n` rows); see this module.
pub(super) const CHUNK: usize = NUMBERED;

/// `$first, $first+1, …` for `count` parameters.
pub(super) fn placeholders(first: usize, count: usize) -> String {
    (first..first + count).map(|i| format!("${i}")).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_parameters_continue_across_rows_and_restart_per_statement() {
        let mut params = Params { anonymous: false, next: 1 };
        assert_eq!(params.row(2), "($1, $2)");
        assert_eq!(params.take(3), "$3, $4, $5");
        assert_eq!(params.restart().row(1), "($1)");
        assert_eq!(params.rows_per_statement(7), NUMBERED / 7);
    }

    #[test]
    fn anonymous_parameters_are_bound_by_position() {
        let mut params = Params { anonymous: true, next: 1 };
        assert_eq!(params.row(3), "(?, ?, ?)");
        assert_eq!(params.rows_per_statement(20), ANONYMOUS / 20);
        assert_eq!(params.rows_per_statement(10_000), 1);
    }
}
