//! The console's people as the service knows them: a user (a tenant's, in
//! one organization with a role, or an operator's sign-in) and a session.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::rules::TenantRole;

/// Whose console a user signs in to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Member {
    /// A tenant's user: one organization, one role.
    Tenant { organization_id: String, role: TenantRole },
    /// An operator's sign-in: the operator's roles decide.
    Operator { operator_id: String },
}

/// A console user: never its password hash or second factor's secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct User {
    pub id: String,
    pub email: String,
    #[serde(flatten)]
    pub member: Member,
    /// Whether a password was set from the enrol link.
    pub enrolled: bool,
    /// Whether sign-in also asks for a TOTP code.
    pub totp: bool,
    #[serde(serialize_with = "crate::deposits::resource::rfc3339")]
    pub created_at: DateTime<Utc>,
    #[serde(
        serialize_with = "crate::deposits::resource::rfc3339_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub removed_at: Option<DateTime<Utc>>,
}

impl User {
    /// The organization of a tenant's user.
    pub fn organization(&self) -> Option<&str> {
        match &self.member {
            Member::Tenant { organization_id, .. } => Some(organization_id),
            Member::Operator { .. } => None,
        }
    }

    /// The role of a tenant's user.
    pub fn role(&self) -> Option<TenantRole> {
        match &self.member {
            Member::Tenant { role, .. } => Some(*role),
            Member::Operator { .. } => None,
        }
    }

    /// The operator an operator's sign-in is.
    pub fn operator(&self) -> Option<&str> {
        match &self.member {
            Member::Operator { operator_id } => Some(operator_id),
            Member::Tenant { .. } => None,
        }
    }
}

/// What sign-in checks of a user: the stored hash and second factor.
/// `Debug` shows neither.
#[derive(Clone)]
pub struct Credentials {
    pub user: User,
    pub password_hash: Option<String>,
    /// The TOTP secret, base32, opened.
    pub totp_secret: Option<String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials").field("user", &self.user.id).finish_non_exhaustive()
    }
}

/// A live session: its user and the CSRF token its forms carry. `Debug`
/// shows neither the token nor its hash.
#[derive(Clone)]
pub struct Session {
    pub id_hash: String,
    pub user: User,
    pub csrf: String,
    pub last_seen_at: i64,
    /// When it began (micros): a session lasts at most [`super::rules::LIFETIME`].
    pub started_at: i64,
    /// Whether it was opened with the second factor as well as the
    /// password: one opened by the password alone reaches only the
    /// second-factor page where a factor is required, whatever the user's
    /// row says.
    pub factor: bool,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").field("user", &self.user.id).finish_non_exhaustive()
    }
}

/// The key of an email for lookups: trimmed, lowercased.
pub fn email_key(email: &str) -> String {
    email.trim().to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn user() -> User {
        User {
            id: "u1".into(),
            email: "ada@acme.example".into(),
            member: Member::Tenant { organization_id: "acme".into(), role: TenantRole::Admin },
            enrolled: true,
            totp: true,
            created_at: DateTime::UNIX_EPOCH,
            removed_at: None,
        }
    }

    #[test]
    fn debug_shows_no_credential() {
        let session = Session {
            id_hash: "hash-of-the-session-token".into(),
            user: user(),
            csrf: "the-csrf-token".into(),
            last_seen_at: 0,
            started_at: 0,
            factor: true,
        };
        let credentials = Credentials {
            user: user(),
            password_hash: Some("$argon2id$…".into()),
            totp_secret: Some("JBSWY3DP".into()),
        };
        for shown in [format!("{session:?}"), format!("{credentials:?}")] {
            assert!(shown.contains("u1"), "{shown}");
            for secret in ["hash-of-the-session-token", "the-csrf-token", "argon2", "JBSWY3DP"] {
                assert!(!shown.contains(secret), "{secret} in {shown}");
            }
        }
    }
}
