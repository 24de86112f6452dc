//! Where mail goes, read from the environment: the SMTP relay
//! (`CUSTODY_INDEXER_SMTP_URL`: `smtps://host[:port]`, or `smtp://` with
//! STARTTLS required; plain `smtp://` only to this machine), its password
//! (`CUSTODY_INDEXER_SMTP_PASSWORD_FILE`, read from a file, never a
//! variable's value), the sender (`CUSTODY_INDEXER_EMAIL_FROM`) and the
//! service's public address links are built from
//! (`CUSTODY_INDEXER_PUBLIC_URL`, https; never a request's `Host`).

use std::{net::IpAddr, path::PathBuf};

use lettre::message::Mailbox;
use url::Url;
use zeroize::Zeroizing;

pub const SMTP_URL_ENV: &str = "CUSTODY_INDEXER_SMTP_URL";
pub const SMTP_PASSWORD_FILE_ENV: &str = "CUSTODY_INDEXER_SMTP_PASSWORD_FILE";
pub const EMAIL_FROM_ENV: &str = "CUSTODY_INDEXER_EMAIL_FROM";
pub const PUBLIC_URL_ENV: &str = "CUSTODY_INDEXER_PUBLIC_URL";

/// The variables production invitations need, as an error names them.
pub const NEEDED: &str =
    "CUSTODY_INDEXER_SMTP_URL, CUSTODY_INDEXER_EMAIL_FROM and CUSTODY_INDEXER_PUBLIC_URL";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SettingsError(pub String);

/// How the connection to the relay is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Security {
    /// TLS from the first byte (`smtps://`, port 465 by default).
    Implicit,
    /// STARTTLS, required: nothing is sent unless the upgrade succeeds
    /// (`smtp://` to another machine, port 587 by default).
    StartTls,
    /// None: `smtp://` to this machine only (port 25 by default).
    Plain,
}

/// An SMTP relay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relay {
    pub host: String,
    pub port: u16,
    pub security: Security,
    pub user: Option<String>,
}

/// The relay of `text`; a password in the URL is refused (it belongs in
/// the password file).
pub fn relay(text: &str) -> Result<Relay, SettingsError> {
    let refused = |why: &str| SettingsError(format!("{SMTP_URL_ENV}: {why}"));
    let url =
        Url::parse(text.trim()).map_err(|_| refused("not a URL (smtps://host:port or smtp://host:port)"))?;
    if url.password().is_some() {
        return Err(refused(&format!(
            "no password in the URL: put it in the file {SMTP_PASSWORD_FILE_ENV} names"
        )));
    }
    let host = url.host_str().filter(|h| !h.is_empty()).ok_or_else(|| refused("no host"))?.to_string();
    let (security, port) = match url.scheme() {
        "smtps" => (Security::Implicit, 465),
        "smtp" if loopback(&host) => (Security::Plain, 25),
        "smtp" => (Security::StartTls, 587),
        other => return Err(refused(&format!("scheme {other}: smtps or smtp"))),
    };
    let user = (!url.username().is_empty()).then(|| url.username().to_string());
    let host = host.trim_start_matches('[').trim_end_matches(']').to_string();
    Ok(Relay { host, port: url.port().unwrap_or(port), security, user })
}

/// The public address links are built from: https, or http to this
/// machine only (a local try).
pub fn public_url(text: &str) -> Result<Url, SettingsError> {
    let refused = |why: &str| SettingsError(format!("{PUBLIC_URL_ENV}: {why}"));
    let url = Url::parse(text.trim()).map_err(|_| refused("not a URL"))?;
    let host = url.host_str().unwrap_or_default();
    match url.scheme() {
        "https" => Ok(url),
        "http" if loopback(host) => Ok(url),
        _ => Err(refused("https (plain http only to this machine): a link must not travel in the clear")),
    }
}

fn loopback(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare == "localhost" || bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// How invitations' links are built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invitations {
    public_url: Url,
}

impl Invitations {
    pub fn new(public_url: Url) -> Self {
        Self { public_url }
    }

    /// `path` (`/console/enrol/…`) under the public address, its own path
    /// kept.
    pub fn link(&self, path: &str) -> String {
        let base = self.public_url.as_str().trim_end_matches('/');
        format!("{base}{path}")
    }
}

/// Where mail goes. `Debug` shows no password.
#[derive(Clone)]
pub struct MailSettings {
    pub relay: Relay,
    pub password: Option<Zeroizing<String>>,
    pub from: Mailbox,
    pub invitations: Invitations,
}

impl std::fmt::Debug for MailSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MailSettings")
            .field("relay", &self.relay)
            .field("from", &self.from.to_string())
            .field("invitations", &self.invitations)
            .finish_non_exhaustive()
    }
}

impl MailSettings {
    /// The settings of the environment: `None` when no mail variable is
    /// set; an error naming what is missing when only some are.
    pub fn from_env() -> Result<Option<Self>, SettingsError> {
        let read = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let (smtp, from, public) = (read(SMTP_URL_ENV), read(EMAIL_FROM_ENV), read(PUBLIC_URL_ENV));
        if smtp.is_none() && from.is_none() && public.is_none() {
            return Ok(None);
        }
        let (Some(smtp), Some(from), Some(public)) = (smtp, from, public) else {
            return Err(SettingsError(format!("mail needs all of {NEEDED}")));
        };
        let password = match read(SMTP_PASSWORD_FILE_ENV) {
            Some(path) => Some(read_password(&PathBuf::from(path))?),
            None => None,
        };
        let from: Mailbox = from
            .parse()
            .map_err(|_| SettingsError(format!("{EMAIL_FROM_ENV}: {from:?} is not an address")))?;
        Ok(Some(Self {
            relay: relay(&smtp)?,
            password,
            from,
            invitations: Invitations::new(public_url(&public)?),
        }))
    }
}

fn read_password(path: &std::path::Path) -> Result<Zeroizing<String>, SettingsError> {
    let text = Zeroizing::new(std::fs::read_to_string(path).map_err(|e| {
        SettingsError(format!("{SMTP_PASSWORD_FILE_ENV}: cannot read {}: {e}", path.display()))
    })?);
    Ok(Zeroizing::new(text.trim_end_matches(['\r', '\n']).to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relay_is_protected_unless_it_is_this_machine() {
        let relay_of = |text: &str| relay(text).map(|r| (r.host, r.port, r.security, r.user));
        let ok = |host: &str, port, security, user: Option<&str>| {
            Ok((host.to_string(), port, security, user.map(str::to_string)))
        };
        assert_eq!(
            relay_of("smtps://mail.example.com"),
            ok("mail.example.com", 465, Security::Implicit, None)
        );
        assert_eq!(
            relay_of("smtp://mail.example.com"),
            ok("mail.example.com", 587, Security::StartTls, None)
        );
        assert_eq!(
            relay_of("smtp://bot@mail.example.com:2587"),
            ok("mail.example.com", 2587, Security::StartTls, Some("bot"))
        );
        assert_eq!(relay_of("smtp://127.0.0.1:2525"), ok("127.0.0.1", 2525, Security::Plain, None));
        assert_eq!(relay_of("smtp://localhost"), ok("localhost", 25, Security::Plain, None));
        assert_eq!(relay_of("smtp://[::1]:2525"), ok("::1", 2525, Security::Plain, None));
        for refused in
            ["http://mail.example.com", "smtps://bot:secret@mail.example.com", "not a url", "smtp://"]
        {
            let error = relay(refused).unwrap_err().to_string();
            assert!(error.starts_with(SMTP_URL_ENV) && !error.contains("secret"), "{refused}: {error}");
        }
    }

    #[test]
    fn links_are_built_on_https_or_this_machine() {
        assert!(public_url("https://custody.example").is_ok());
        assert!(public_url("http://127.0.0.1:8080").is_ok());
        assert!(public_url("http://custody.example").is_err());
        assert!(public_url("ftp://custody.example").is_err());
        let invitations = Invitations::new(public_url("https://custody.example/base/").unwrap());
        assert_eq!(invitations.link("/console/enrol/t"), "https://custody.example/base/console/enrol/t");
    }
}
