//! The console's rules, pure: what each tenant role may do, the password
//! policy, how long sessions and enrol links live, the delay after failed
//! sign-ins (per email and client address, and per client address), the
//! client address behind trusted proxies, when the session cookie is
//! `Secure`, and the CSRF comparison.

use std::{net::IpAddr, time::Duration};

use ipnet::IpNet;
use subtle::ConstantTimeEq;

/// A session unused this long is over: the next request signs in again.
pub const IDLE: Duration = Duration::from_secs(30 * 60);

/// The longest a session lasts, however busy.
pub const LIFETIME: Duration = Duration::from_secs(12 * 3600);

/// How long an enrol link may be used.
pub const ENROL_VALID: Duration = Duration::from_secs(24 * 3600);

/// The fewest characters of a password.
pub const MIN_PASSWORD: usize = 12;

/// The most characters of a password (hashing is deliberately slow).
pub const MAX_PASSWORD: usize = 256;

/// Failed sign-ins for one email from one client address before each
/// further try waits.
pub const FREE_FAILURES: i64 = 5;

/// The longest wait between tries.
pub const MAX_DELAY: Duration = Duration::from_secs(15 * 60);

/// A tenant user's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TenantRole {
    /// Keys, webhooks and the team.
    Admin,
    /// Keys and webhooks.
    Developer,
    /// Reads only.
    Viewer,
}

impl TenantRole {
    pub fn as_str(self) -> &'static str {
        match self {
            TenantRole::Admin => "admin",
            TenantRole::Developer => "developer",
            TenantRole::Viewer => "viewer",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "admin" => Some(TenantRole::Admin),
            "developer" => Some(TenantRole::Developer),
            "viewer" => Some(TenantRole::Viewer),
            _ => None,
        }
    }

    /// Whether the role may take `action`.
    pub fn may(self, action: TenantAction) -> bool {
        match action {
            TenantAction::Read => true,
            TenantAction::Keys | TenantAction::Webhooks => self != TenantRole::Viewer,
            TenantAction::Team | TenantAction::UnpairedKeys => self == TenantRole::Admin,
        }
    }
}

impl std::str::FromStr for TenantRole {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        Self::parse(text).ok_or_else(|| format!("role: {text:?} is not admin, developer or viewer"))
    }
}

/// What a tenant user does, by what its role must allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TenantAction {
    Read,
    /// Keys that sign their requests: create one paired with a public key,
    /// pair, revoke.
    Keys,
    Webhooks,
    Team,
    /// A key whose bearer token alone is enough: create one without a
    /// public key, or unpair one.
    UnpairedKeys,
}

/// Whether a person must have a second factor before any page: in
/// `production`, everyone who can move money or make keys (an operator,
/// `role` `None`, and a tenant's `admin` and `developer`); a tenant's
/// `viewer` and everyone in `sandbox` may go without.
pub fn factor_required(production: bool, role: Option<TenantRole>) -> bool {
    production && role != Some(TenantRole::Viewer)
}

/// Why a password is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WeakPassword {
    #[error("the password needs at least {MIN_PASSWORD} characters")]
    Short,
    #[error("the password may have at most {MAX_PASSWORD} characters")]
    Long,
    #[error("the password and its confirmation differ")]
    Differ,
}

/// Whether `password` (typed twice) may be set.
pub fn password(password: &str, again: &str) -> Result<(), WeakPassword> {
    let count = password.chars().count();
    if count < MIN_PASSWORD {
        return Err(WeakPassword::Short);
    }
    if count > MAX_PASSWORD {
        return Err(WeakPassword::Long);
    }
    if password != again {
        return Err(WeakPassword::Differ);
    }
    Ok(())
}

/// Failed sign-ins from one client address, whatever the emails, before
/// its tries are slowed too.
pub const CLIENT_FREE_FAILURES: i64 = 20;

/// How long failures are remembered: a count whose last failure is older
/// starts again, and the row is purged.
pub const FAILURES_KEPT: Duration = Duration::from_secs(24 * 3600);

/// How long the next try of one email from one client address must wait
/// after `failures` failed sign-ins: none for the first
/// [`FREE_FAILURES`], then 1 s, doubling with each further failure, up to
/// [`MAX_DELAY`].
pub fn delay(failures: i64) -> Duration {
    doubling(failures, FREE_FAILURES)
}

/// As [`delay`], for every try from one client address after
/// [`CLIENT_FREE_FAILURES`] failures of any emails.
pub fn client_delay(failures: i64) -> Duration {
    doubling(failures, CLIENT_FREE_FAILURES)
}

fn doubling(failures: i64, free: i64) -> Duration {
    let beyond = failures - free;
    if beyond < 0 {
        return Duration::ZERO;
    }
    let seconds = 1u64.checked_shl(beyond.min(63) as u32).unwrap_or(u64::MAX);
    Duration::from_secs(seconds).min(MAX_DELAY)
}

/// How long a try at `now` must still wait after failures whose delay is
/// `delay`, the last at `last_failed` (micros); `None` when it may go on.
pub fn wait(delay: Duration, last_failed: i64, now: i64) -> Option<Duration> {
    let until = last_failed.saturating_add(micros(delay));
    (now < until).then(|| Duration::from_micros((until - now) as u64))
}

/// The address a console request comes from: the peer's, or, when the
/// peer is one of the `trusted` proxies, the last address of
/// `X-Forwarded-For` that is not itself a trusted proxy (a client writes
/// what it likes at the left of the header; each proxy appends the address
/// it was reached from at its right).
pub fn client_address(peer: IpAddr, forwarded_for: Option<&str>, trusted: &[IpNet]) -> IpAddr {
    let is_trusted = |address: &IpAddr| trusted.iter().any(|net| net.contains(address));
    if !is_trusted(&peer) {
        return peer;
    }
    let mut client = peer;
    for hop in forwarded_for.unwrap_or_default().rsplit(',').map(str::trim) {
        match hop.parse::<IpAddr>() {
            Ok(address) => {
                client = address;
                if !is_trusted(&address) {
                    break;
                }
            }
            Err(_) => break,
        }
    }
    client
}

/// Whether a session that began at `started` and was last seen at
/// `last_seen` (micros) is still live at `now`.
pub fn live(started: i64, last_seen: i64, now: i64) -> bool {
    now.saturating_sub(last_seen) <= micros(IDLE) && now.saturating_sub(started) <= micros(LIFETIME)
}

/// Whether the session cookie is `Secure`: always, except when the console
/// is reached at a loopback address over plain `http://` (a browser drops
/// a `Secure` cookie there).
pub fn secure_cookie(https: bool, host: &str) -> bool {
    https || !loopback(host)
}

/// Whether a `Host` header names this machine: `localhost`, `127.x.y.z`,
/// `[::1]`, with or without a port.
fn loopback(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or_default()
    } else {
        host.rsplit_once(':').map_or(host, |(name, _)| name)
    };
    if name.eq_ignore_ascii_case("localhost") {
        return true;
    }
    name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Whether the CSRF token presented is the session's, in constant time.
pub fn csrf_matches(session: &str, presented: Option<&str>) -> bool {
    presented.is_some_and(|p| !session.is_empty() && bool::from(p.as_bytes().ct_eq(session.as_bytes())))
}

fn micros(duration: Duration) -> i64 {
    i64::try_from(duration.as_micros()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_role_may_do_what_it_names() {
        use TenantAction::*;
        let table = [
            (TenantRole::Admin, [true, true, true, true, true]),
            (TenantRole::Developer, [true, true, true, false, false]),
            (TenantRole::Viewer, [true, false, false, false, false]),
        ];
        for (role, allowed) in table {
            for (action, expected) in [Read, Keys, Webhooks, Team, UnpairedKeys].into_iter().zip(allowed) {
                assert_eq!(role.may(action), expected, "{role:?} {action:?}");
            }
            assert_eq!(TenantRole::parse(role.as_str()), Some(role));
        }
        assert_eq!(TenantRole::parse("Admin"), None);
        assert!("owner".parse::<TenantRole>().unwrap_err().contains("owner"));
    }

    #[test]
    fn a_second_factor_is_required_in_production_of_who_can_move_money() {
        let table = [
            (true, None, true),
            (true, Some(TenantRole::Admin), true),
            (true, Some(TenantRole::Developer), true),
            (true, Some(TenantRole::Viewer), false),
            (false, None, false),
            (false, Some(TenantRole::Admin), false),
            (false, Some(TenantRole::Developer), false),
            (false, Some(TenantRole::Viewer), false),
        ];
        for (production, role, expected) in table {
            assert_eq!(factor_required(production, role), expected, "{production} {role:?}");
        }
    }

    #[test]
    fn passwords_need_twelve_characters_typed_twice_alike() {
        let long = "x".repeat(MAX_PASSWORD + 1);
        let table: [(&str, &str, Result<(), WeakPassword>); 6] = [
            ("", "", Err(WeakPassword::Short)),
            ("elevenchars", "elevenchars", Err(WeakPassword::Short)),
            ("twelve chars", "twelve chars", Ok(())),
            // Characters, not bytes: twelve accented letters pass, eleven do not.
            ("éééééééééééé", "éééééééééééé", Ok(())),
            ("twelve chars", "twelve charz", Err(WeakPassword::Differ)),
            (&long, &long, Err(WeakPassword::Long)),
        ];
        for (first, again, expected) in table {
            assert_eq!(password(first, again), expected, "{first:?}");
        }
        assert_eq!(password("ééééééééééé", "ééééééééééé"), Err(WeakPassword::Short));
    }

    #[test]
    fn the_delay_doubles_after_five_failures_up_to_fifteen_minutes() {
        let table = [(0, 0), (4, 0), (5, 1), (6, 2), (7, 4), (10, 32), (14, 512), (15, 900), (80, 900)];
        for (failures, seconds) in table {
            assert_eq!(delay(failures), Duration::from_secs(seconds), "{failures} failures");
        }
        let second = 1_000_000;
        assert_eq!(wait(delay(4), 0, 1), None);
        assert_eq!(wait(delay(5), 10 * second, 10 * second), Some(Duration::from_secs(1)));
        assert_eq!(wait(delay(6), 10 * second, 11 * second), Some(Duration::from_secs(1)));
        assert_eq!(wait(delay(6), 10 * second, 12 * second), None);
        // A client address, whatever the emails: after twenty.
        let table = [(19, 0), (20, 1), (21, 2), (40, 900)];
        for (failures, seconds) in table {
            assert_eq!(client_delay(failures), Duration::from_secs(seconds), "{failures} failures");
        }
    }

    #[test]
    fn the_client_is_the_peer_unless_a_trusted_proxy_names_it() {
        let trusted: Vec<IpNet> = ["10.0.0.0/8", "192.0.2.1/32"].iter().map(|n| n.parse().unwrap()).collect();
        let ip = |text: &str| text.parse::<IpAddr>().unwrap();
        let table = [
            // An untrusted peer is the client, whatever it forwards.
            ("203.0.113.5", Some("198.51.100.1"), "203.0.113.5"),
            ("203.0.113.5", None, "203.0.113.5"),
            // A trusted proxy names the client at the header's right.
            ("10.1.2.3", Some("198.51.100.1"), "198.51.100.1"),
            // A client's own entry at the left is not believed.
            ("10.1.2.3", Some("1.1.1.1, 198.51.100.1"), "198.51.100.1"),
            // Through two trusted proxies.
            ("10.1.2.3", Some("198.51.100.1, 192.0.2.1"), "198.51.100.1"),
            // A proxy with no header, or a garbled one: the last good hop.
            ("10.1.2.3", None, "10.1.2.3"),
            ("10.1.2.3", Some("junk"), "10.1.2.3"),
            ("10.1.2.3", Some("198.51.100.1, junk"), "10.1.2.3"),
            ("192.0.2.1", Some("10.9.9.9"), "10.9.9.9"),
        ];
        for (peer, forwarded, client) in table {
            assert_eq!(client_address(ip(peer), forwarded, &trusted), ip(client), "{peer} {forwarded:?}");
        }
    }

    #[test]
    fn sessions_end_after_thirty_idle_minutes_or_twelve_hours() {
        let minute = 60_000_000;
        let table = [
            (0, 0, 0, true),
            (0, 0, 30 * minute, true),
            (0, 0, 30 * minute + 1, false),
            (0, 10 * minute, 39 * minute, true),
            (0, 719 * minute, 720 * minute, true),
            (0, 720 * minute, 720 * minute + 1, false),
        ];
        for (started, seen, now, expected) in table {
            assert_eq!(live(started, seen, now), expected, "{started} {seen} {now}");
        }
    }

    #[test]
    fn the_cookie_is_secure_except_on_loopback_http() {
        let table = [
            (false, "127.0.0.1:8080", false),
            (false, "localhost:3000", false),
            (false, "LOCALHOST", false),
            (false, "[::1]:8080", false),
            (false, "127.1.2.3", false),
            (false, "console.example.com", true),
            (false, "10.0.0.5:8080", true),
            (false, "localhost.example.com", true),
            (false, "", true),
            (true, "127.0.0.1:8080", true),
            (true, "console.example.com", true),
        ];
        for (https, host, secure) in table {
            assert_eq!(secure_cookie(https, host), secure, "{https} {host}");
        }
    }

    #[test]
    fn the_csrf_token_must_be_the_sessions() {
        assert!(csrf_matches("abc", Some("abc")));
        assert!(!csrf_matches("abc", Some("abd")));
        assert!(!csrf_matches("abc", Some("")));
        assert!(!csrf_matches("abc", None));
        assert!(!csrf_matches("", Some("")));
    }
}
