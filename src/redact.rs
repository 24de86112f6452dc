//! Keeps secrets out of logs and errors: RPC URLs often carry an API key in the
//! path, the query or the user info, so only scheme and host are ever shown.

use std::fmt;

/// An RPC endpoint. `Display` and `Debug` show `scheme://host[:port]/…` only;
/// [`RpcUrl::expose`] gives the full URL to the transport.
#[derive(Clone, PartialEq, Eq)]
pub struct RpcUrl(url::Url);

#[derive(Debug, thiserror::Error)]
#[error(
    "invalid rpc url: expected http(s):// or ws(s):// and a host (the value is not shown: it may hold a key)"
)]
pub struct InvalidUrl;

impl RpcUrl {
    pub fn parse(text: &str) -> Result<Self, InvalidUrl> {
        let url = url::Url::parse(text.trim()).map_err(|_| InvalidUrl)?;
        match url.scheme() {
            "http" | "https" | "ws" | "wss" if url.host_str().is_some() => Ok(Self(url)),
            _ => Err(InvalidUrl),
        }
    }

    pub fn expose(&self) -> &url::Url {
        &self.0
    }

    pub fn is_websocket(&self) -> bool {
        matches!(self.0.scheme(), "ws" | "wss")
    }
}

impl fmt::Display for RpcUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&redact_urls(self.0.as_str()))
    }
}

impl fmt::Debug for RpcUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RpcUrl({self})")
    }
}

/// Replaces every URL in `text` by its scheme and host, dropping user info,
/// path and query: `error sending request for url (https://k@h/v2/KEY)` becomes
/// `error sending request for url (https://h/…)`.
pub fn redact_urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = find_scheme(rest) {
        out.push_str(&rest[..start]);
        let candidate = &rest[start..];
        let end = candidate
            .find(|c: char| c.is_whitespace() || matches!(c, ')' | '"' | '\'' | '>' | ',' | ']'))
            .unwrap_or(candidate.len());
        out.push_str(&redact_one(&candidate[..end]));
        rest = &candidate[end..];
    }
    out.push_str(rest);
    out
}

fn find_scheme(text: &str) -> Option<usize> {
    ["https://", "http://", "wss://", "ws://", "nats://", "tls://"].iter().filter_map(|s| text.find(s)).min()
}

fn redact_one(url: &str) -> String {
    let (scheme, after) = url.split_once("://").unwrap_or(("", url));
    let authority = after.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit('@').next().unwrap_or("");
    let hidden = authority.contains('@') || after.len() > authority.len() + 1;
    if hidden { format!("{scheme}://{host}/…") } else { format!("{scheme}://{host}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hides_paths_queries_and_credentials() {
        assert_eq!(
            redact_urls("error sending request for url (https://eth-mainnet.example.com/v2/SECRETKEY)"),
            "error sending request for url (https://eth-mainnet.example.com/…)"
        );
        assert_eq!(redact_urls("wss://user:pass@node.example:8546"), "wss://node.example:8546/…");
        assert_eq!(redact_urls("x http://h/?apikey=abc y"), "x http://h/… y");
        assert_eq!(redact_urls("http://127.0.0.1:8545"), "http://127.0.0.1:8545");
        assert_eq!(redact_urls("http://127.0.0.1:8545/"), "http://127.0.0.1:8545");
        assert_eq!(redact_urls("no url here"), "no url here");
        assert_eq!(
            redact_urls("nats://svc:pw@nats-1:4222,nats://svc:pw@nats-2:4222"),
            "nats://nats-1:4222/…,nats://nats-2:4222/…"
        );
        assert_eq!(redact_urls("tls://token@nats.example:4222"), "tls://nats.example:4222/…");
    }

    #[test]
    fn rpc_url_never_displays_its_secret() {
        let url = RpcUrl::parse("https://rpc.example/key/abc123?token=zzz").unwrap();
        assert!(!url.to_string().contains("abc123"));
        assert!(!format!("{url:?}").contains("zzz"));
        assert_eq!(url.expose().as_str(), "https://rpc.example/key/abc123?token=zzz");
        let err = RpcUrl::parse("ftp://h/secret").unwrap_err().to_string();
        assert!(!err.contains("secret"), "{err}");
    }
}
