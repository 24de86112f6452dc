//! Whether an existing stream can take the sink's events: pure, judged from
//! the configuration the server reports. A stream the sink creates is
//! always fit; one an operator made or changed may not be.

use std::time::Duration;

use async_nats::jetstream::stream::{Config, RetentionPolicy, StorageType};

use crate::events::subject::SUBJECTS;

/// What a stream's configuration means for the sink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fitness {
    /// It takes every subject the sink publishes, with these reasons for an
    /// operator's eye (none when it is as the sink would create it).
    Fit(Vec<String>),
    /// It cannot take the sink's events: publishing waits until it is changed.
    Unfit(String),
}

/// Judges `config` for the subjects the sink publishes, all of the shape
/// `published` (a filter such as `custody.events.*.*`), and the sink's
/// duplicate window. One of the stream's subjects must cover the shape by
/// itself: subjects that only together take every event type are refused.
pub fn judge(config: &Config, published: &str, duplicate_window: Duration) -> Fitness {
    let name = &config.name;
    if !config.subjects.iter().any(|filter| covers(filter, published)) {
        return Fitness::Unfit(format!(
            "the stream {name} takes the subjects {:?}, none of which covers every subject the sink \
             publishes ({published}): add {SUBJECTS} to its subjects (or delete it, and the sink creates it)",
            config.subjects
        ));
    }
    if config.sealed {
        return Fitness::Unfit(format!("the stream {name} is sealed: it takes no message"));
    }
    if config.no_ack {
        return Fitness::Unfit(format!(
            "the stream {name} acknowledges nothing (no_ack): the sink moves on only past acknowledged events"
        ));
    }
    let mut warnings = Vec::new();
    if config.storage == StorageType::Memory {
        warnings.push(format!("the stream {name} is kept in memory: a server restart loses what it holds"));
    }
    if config.retention == RetentionPolicy::Interest {
        warnings.push(format!(
            "the stream {name} keeps a message only while a consumer has not acknowledged it (interest \
             retention): events published while no consumer exists are dropped"
        ));
    }
    if config.duplicate_window < duplicate_window {
        warnings.push(format!(
            "the stream {name} drops duplicates for {:?}, less than the sink's {duplicate_window:?}: an event \
             published again after a crash may arrive twice",
            config.duplicate_window
        ));
    }
    Fitness::Fit(warnings)
}

/// Whether the subject filter `filter` matches every subject the filter
/// `subjects` matches (`*` one token, `>` one or more at the end).
pub fn covers(filter: &str, subjects: &str) -> bool {
    let mut wanted = subjects.split('.');
    for token in filter.split('.') {
        match (token, wanted.next()) {
            (">", Some(_)) => return true,
            (_, None) | (_, Some(">")) => return false,
            ("*", Some(_)) => {}
            (token, Some(other)) if token == other => {}
            _ => return false,
        }
    }
    wanted.next().is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PUBLISHED: &str = crate::events::subject::PUBLISHED;
    const WINDOW: Duration = Duration::from_secs(600);

    #[test]
    fn a_filter_covers_the_sinks_subjects_only_when_it_matches_all_of_them() {
        let table = [
            ("custody.events.>", true),
            ("custody.>", true),
            (">", true),
            ("*.events.>", true),
            ("custody.*.>", true),
            ("custody.events.*.*", true),
            ("custody.events.*.>", true),
            ("custody.events.*", false),
            ("custody.events.*.*.*", false),
            ("custody.events.*.deposit_v2", false),
            ("custody.events.acme.>", false),
            ("custody.events", false),
            ("custody.other.>", false),
            ("", false),
        ];
        for (filter, covered) in table {
            assert_eq!(covers(filter, PUBLISHED), covered, "{filter}");
        }
        assert!(covers("a.b", "a.b") && !covers("a.b", "a.b.c") && !covers("a.b.c", "a.b"));
    }

    /// A change to the configuration the sink would create.
    type Change = fn(&mut Config);

    fn config(change: impl FnOnce(&mut Config)) -> Config {
        let mut config = Config {
            name: "CUSTODY_EVENTS".into(),
            subjects: vec![SUBJECTS.into()],
            storage: StorageType::File,
            duplicate_window: WINDOW,
            ..Default::default()
        };
        change(&mut config);
        config
    }

    #[test]
    fn a_stream_as_the_sink_creates_it_is_fit() {
        assert_eq!(judge(&config(|_| {}), PUBLISHED, WINDOW), Fitness::Fit(vec![]));
        let wider = config(|c| c.subjects = vec!["audit.>".into(), "custody.>".into()]);
        assert_eq!(judge(&wider, PUBLISHED, WINDOW), Fitness::Fit(vec![]));
    }

    #[test]
    fn a_stream_that_cannot_take_the_events_is_unfit() {
        let cases: [(&str, Change); 4] = [
            ("none of which covers", |c| c.subjects = vec!["custody.events.*".into()]),
            ("none of which covers", |c| c.subjects = vec![]),
            ("sealed", |c| c.sealed = true),
            ("no_ack", |c| c.no_ack = true),
        ];
        for (why, change) in cases {
            match judge(&config(change), PUBLISHED, WINDOW) {
                Fitness::Unfit(reason) => assert!(reason.contains(why), "{reason}"),
                fit => panic!("{why}: {fit:?}"),
            }
        }
    }

    #[test]
    fn a_weaker_stream_is_fit_with_warnings() {
        let cases: [(&str, Change); 3] = [
            ("in memory", |c| c.storage = StorageType::Memory),
            ("interest retention", |c| c.retention = RetentionPolicy::Interest),
            ("drops duplicates for 5s", |c| c.duplicate_window = Duration::from_secs(5)),
        ];
        for (why, change) in cases {
            match judge(&config(change), PUBLISHED, WINDOW) {
                Fitness::Fit(warnings) => {
                    assert!(warnings.len() == 1 && warnings[0].contains(why), "{why}: {warnings:?}")
                }
                unfit => panic!("{why}: {unfit:?}"),
            }
        }
        let work_queue = config(|c| c.retention = RetentionPolicy::WorkQueue);
        assert_eq!(
            judge(&work_queue, PUBLISHED, WINDOW),
            Fitness::Fit(vec![]),
            "a work queue is a consumer's choice"
        );
    }
}
