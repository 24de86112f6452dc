//! Column arrays: the rows of a multi-row statement on PostgreSQL, sent as
//! one text parameter per column and read back as rows by
//! `unnest(string_to_array(…))`.
//!
//! A column's parameter is each of its values after a unit separator
//! (U+001F), NULL written as a record separator (U+001E) alone. The server
//! splits it without unescaping anything, and a whole statement is one plan
//! and one round trip for a thousand rows. Hashes, addresses, amounts,
//! symbols and JSON payloads (whose strings escape every control character)
//! never hold either character; a statement with a value that does (an
//! operator's account id may) cannot go as arrays, and its caller writes
//! those rows as bound parameters instead.

use std::fmt::Write;

use sqlx::{Any, any::AnyArguments, query::Query};

/// Written before each value of a column.
const SEPARATOR: char = '\u{1f}';

/// A column's value that stands for NULL.
const NULL: char = '\u{1e}';

/// The type a column's values are read as.
#[derive(Clone, Copy)]
pub(super) enum Kind {
    Text,
    Bigint,
}

/// Rows collected column by column: each row's values are pushed in column
/// order.
pub(super) struct ColumnArrays {
    columns: Vec<String>,
    next: usize,
    /// Whether a value holds a separator.
    reserved: bool,
}

impl ColumnArrays {
    pub(super) fn new(columns: usize) -> Self {
        Self { columns: vec![String::new(); columns.max(1)], next: 0, reserved: false }
    }

    /// The current row's next column.
    fn column(&mut self) -> &mut String {
        let at = self.next;
        self.next = (at + 1) % self.columns.len();
        let column = &mut self.columns[at];
        column.push(SEPARATOR);
        column
    }

    pub(super) fn text(&mut self, value: &str) -> &mut Self {
        self.reserved |= memchr::memchr2(SEPARATOR as u8, NULL as u8, value.as_bytes()).is_some();
        self.column().push_str(value);
        self
    }

    pub(super) fn optional_text(&mut self, value: Option<&str>) -> &mut Self {
        match value {
            Some(value) => self.text(value),
            None => self.null(),
        }
    }

    pub(super) fn bigint(&mut self, value: i64) -> &mut Self {
        // Writing to a String cannot fail.
        let _ = write!(self.column(), "{value}");
        self
    }

    pub(super) fn optional_bigint(&mut self, value: Option<i64>) -> &mut Self {
        match value {
            Some(value) => self.bigint(value),
            None => self.null(),
        }
    }

    fn null(&mut self) -> &mut Self {
        self.column().push(NULL);
        self
    }

    /// Binds the columns, in order, as the statement's parameters; `None`
    /// when a value holds a separator, which the arrays cannot carry.
    pub(super) fn bind<'q>(
        self,
        query: Query<'q, Any, AnyArguments<'q>>,
    ) -> Option<Query<'q, Any, AnyArguments<'q>>> {
        assert_eq!(self.next, 0, "every row of a multi-row statement is complete");
        (!self.reserved).then(|| self.columns.into_iter().fold(query, |q, column| q.bind(column)))
    }
}

/// `unnest(…) AS r(…)`: the rows of `columns` (name and kind), bound as
/// `$1`, `$2`, … in order by [`ColumnArrays::bind`]. Each array is split
/// after its first separator (`[2:]`), so a single empty value is one
/// element, not none.
pub(super) fn unnest(columns: &[(&str, Kind)]) -> String {
    let arrays: Vec<String> = columns
        .iter()
        .enumerate()
        .map(|(i, (_, kind))| {
            let array = format!("(string_to_array(${}, E'\\x1f', E'\\x1e'))[2:]", i + 1);
            match kind {
                Kind::Text => array,
                Kind::Bigint => format!("CAST({array} AS bigint[])"),
            }
        })
        .collect();
    let names: Vec<&str> = columns.iter().map(|(name, _)| *name).collect();
    format!("unnest({}) AS r({})", arrays.join(", "), names.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_value_follows_a_separator_and_null_is_its_own_mark() {
        let mut arrays = ColumnArrays::new(2);
        arrays.text("a").optional_bigint(None);
        arrays.text("").bigint(-7);
        assert_eq!(arrays.columns, ["\u{1f}a\u{1f}", "\u{1f}\u{1e}\u{1f}-7"]);
        assert!(arrays.bind(sqlx::query("SELECT 1")).is_some());
    }

    #[test]
    fn a_value_holding_a_separator_or_the_null_mark_cannot_go_as_arrays() {
        for value in ["a\u{1f}b", "\u{1e}", "ü\u{1e}"] {
            let mut arrays = ColumnArrays::new(1);
            arrays.text("fine").text(value);
            assert!(arrays.bind(sqlx::query("SELECT 1")).is_none(), "{value:?}");
        }
    }

    #[test]
    #[should_panic(expected = "every row of a multi-row statement is complete")]
    fn an_incomplete_row_is_a_defect() {
        let mut arrays = ColumnArrays::new(3);
        arrays.text("a").text("b");
        let _ = arrays.bind(sqlx::query("SELECT 1"));
    }

    #[test]
    fn the_source_reads_each_column_as_its_kind() {
        assert_eq!(
            unnest(&[("id", Kind::Text), ("seq", Kind::Bigint)]),
            "unnest((string_to_array($1, E'\\x1f', E'\\x1e'))[2:], \
             CAST((string_to_array($2, E'\\x1f', E'\\x1e'))[2:] AS bigint[])) AS r(id, seq)"
        );
    }
}
