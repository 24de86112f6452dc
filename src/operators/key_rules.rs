//! How long operator keys live, pure: 90 days in `production` unless
//! asked otherwise (1 to 365), never beyond the key that asked for them;
//! and what `health` says before the last admin key expires.

use std::time::Duration;

use super::rules::Refused;
use crate::environment::Environment;

/// How many days a production operator key lasts unless asked otherwise,
/// and at most.
pub const KEY_DAYS: u32 = 90;
pub const MAX_KEY_DAYS: u32 = 365;

/// How long before the last admin key expires `health` warns.
pub const KEY_WARNING: Duration = Duration::from_secs(14 * 24 * 3600);

const DAY_MICROS: i64 = 86_400_000_000;

/// When a key made at `now` expires: after `asked` days (1 to 365; in
/// `production` 90 unless asked, in `sandbox` never unless asked), and
/// never after `parent` (the key of the request that made it).
pub fn key_expiry(
    environment: Environment,
    now: i64,
    asked: Option<u32>,
    parent: Option<i64>,
) -> Result<Option<i64>, Refused> {
    if let Some(days) = asked.filter(|days| !(1..=MAX_KEY_DAYS).contains(days)) {
        return Err(Refused::KeyDays(days));
    }
    let days = match environment {
        Environment::Production => Some(asked.unwrap_or(KEY_DAYS)),
        Environment::Sandbox => asked,
    };
    let own = days.map(|days| now.saturating_add(i64::from(days) * DAY_MICROS));
    Ok(match (own, parent) {
        (Some(own), Some(parent)) => Some(own.min(parent)),
        (own, parent) => own.or(parent),
    })
}

/// What `health` says of the admins' keys, given when the last of them
/// expires (see `Store::last_admin_key_expiry`): a warning from
/// [`KEY_WARNING`] before, and when none is live.
pub fn admin_key_warning(last: Option<Option<i64>>, now: i64) -> Option<String> {
    let make = "an admin makes a new one with POST /operator/v1/me/keys";
    match last {
        None => Some(format!(
            "no admin operator key is live: nobody can manage operators; {make} before the last expires"
        )),
        Some(None) => None,
        Some(Some(at)) if at.saturating_sub(now) <= KEY_WARNING.as_micros() as i64 => {
            let when = chrono::DateTime::from_timestamp_micros(at).unwrap_or_default();
            let days = at.saturating_sub(now) / DAY_MICROS;
            Some(format!(
                "the last admin operator key expires at {} (in {days} days): {make}",
                when.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            ))
        }
        Some(Some(_)) => None,
    }
}

/// Whether a key expiring at `expires_at` has expired at `now`.
pub fn key_expired(expires_at: Option<i64>, now: i64) -> bool {
    expires_at.is_some_and(|at| at <= now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_last_ninety_days_in_production_and_never_outlive_their_parent() {
        use Environment::*;
        let day = DAY_MICROS;
        let cases = [
            (Production, None, None, Ok(Some(90 * day))),
            (Production, Some(365), None, Ok(Some(365 * day))),
            (Production, Some(30), Some(10 * day), Ok(Some(10 * day))),
            (Production, None, Some(400 * day), Ok(Some(90 * day))),
            (Production, Some(0), None, Err(Refused::KeyDays(0))),
            (Production, Some(366), None, Err(Refused::KeyDays(366))),
            (Sandbox, None, None, Ok(None)),
            (Sandbox, Some(7), None, Ok(Some(7 * day))),
            (Sandbox, None, Some(3 * day), Ok(Some(3 * day))),
        ];
        for (environment, asked, parent, expected) in cases {
            assert_eq!(
                key_expiry(environment, 0, asked, parent),
                expected,
                "{environment} {asked:?} {parent:?}"
            );
        }
        assert!(key_expired(Some(5), 5) && !key_expired(Some(6), 5) && !key_expired(None, i64::MAX));
    }

    #[test]
    fn health_warns_two_weeks_before_the_last_admin_key_expires() {
        let day = DAY_MICROS;
        assert!(admin_key_warning(None, 0).unwrap().contains("no admin operator key is live"));
        assert_eq!(admin_key_warning(Some(None), 0), None);
        assert_eq!(admin_key_warning(Some(Some(15 * day)), 0), None);
        let soon = admin_key_warning(Some(Some(14 * day)), 0).unwrap();
        assert!(soon.contains("in 14 days") && soon.contains("1970-01-15T00:00:00Z"), "{soon}");
    }
}
