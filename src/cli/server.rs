//! The service as the command line's deciding and managing commands reach
//! it: `--server URL` (or `CUSTODY_INDEXER_SERVER`), authenticated by the
//! operator key in `CUSTODY_INDEXER_OPERATOR_KEY` (an environment variable,
//! so that the key never shows in a process list or a shell history).

use alloy::transports::http::reqwest;
use anyhow::{Context, bail};
use clap::Args;
use serde_json::Value;

/// Where an operator's key is read from.
pub const OPERATOR_KEY_ENV: &str = "CUSTODY_INDEXER_OPERATOR_KEY";

/// The service, reached as one operator.
pub struct Server {
    base: reqwest::Url,
    key: String,
    client: reqwest::Client,
}

impl Server {
    /// The service at `url`, with the operator key of the environment.
    pub fn from_env(url: &str) -> anyhow::Result<Self> {
        let key =
            std::env::var(OPERATOR_KEY_ENV).ok().filter(|k| !k.trim().is_empty()).with_context(|| {
                format!("acting through the service needs an operator key in {OPERATOR_KEY_ENV}")
            })?;
        let base = reqwest::Url::parse(url).with_context(|| format!("--server {url:?} is not a URL"))?;
        if !carries_keys(&base) {
            bail!(
                "--server {url}: an operator key is sent only over https, or plain http to this machine \
                 (localhost, 127.0.0.1, [::1])"
            );
        }
        let client = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(30))
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Self { base, key: key.trim().to_string(), client })
    }

    pub async fn get(&self, path: &str) -> anyhow::Result<Value> {
        self.send(self.client.get(self.url(path)?)).await
    }

    pub async fn post(&self, path: &str, body: &Value) -> anyhow::Result<Value> {
        self.send(self.client.post(self.url(path)?).json(body)).await
    }

    pub async fn put(&self, path: &str, body: &Value) -> anyhow::Result<Value> {
        self.send(self.client.put(self.url(path)?).json(body)).await
    }

    /// `path` under the base URL, its own path kept (`https://host/custody/`).
    pub fn url(&self, path: &str) -> anyhow::Result<reqwest::Url> {
        let mut base = self.base.clone();
        if !base.path().ends_with('/') {
            base.set_path(&format!("{}/", base.path()));
        }
        base.join(path.trim_start_matches('/')).with_context(|| format!("{path} under {}", self.base))
    }

    /// Sends `request`; a refusal is an error naming the service's status,
    /// code and message (a missing role, a four-eyes rule).
    async fn send(&self, request: reqwest::RequestBuilder) -> anyhow::Result<Value> {
        let answer =
            request.bearer_auth(&self.key).send().await.with_context(|| format!("reaching {}", self.base))?;
        let status = answer.status();
        let text = answer.text().await.unwrap_or_default();
        let body: Value = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        if !status.is_success() {
            let code = body["code"].as_str().unwrap_or("");
            let message = body["message"].as_str().map(str::to_string).unwrap_or_else(|| body.to_string());
            bail!("the service refused ({} {code}): {message}", status.as_u16());
        }
        Ok(body)
    }
}

/// `text` as one URL path segment: an id never reaches another route.
pub fn segment(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            other => format!("%{other:02X}"),
        })
        .collect()
}

/// Whether an operator key may be sent to `url`: over `https`, or over
/// plain `http` to a loopback address only (it never leaves the machine).
fn carries_keys(url: &reqwest::Url) -> bool {
    match (url.scheme(), url.host()) {
        ("https", Some(_)) => true,
        ("http", Some(url::Host::Domain(name))) => name.eq_ignore_ascii_case("localhost"),
        ("http", Some(url::Host::Ipv4(ip))) => ip.is_loopback(),
        ("http", Some(url::Host::Ipv6(ip))) => ip.is_loopback(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn keys_go_over_https_or_stay_on_this_machine() {
        for (url, carries) in [
            ("https://ops.example.com", true),
            ("http://127.0.0.1:8080", true),
            ("http://127.0.0.2:8080", true),
            ("http://localhost:8080", true),
            ("http://[::1]:8080", true),
            ("http://ops.example.com", false),
            ("http://10.0.0.5:8080", false),
            ("ftp://127.0.0.1", false),
        ] {
            let parsed = super::reqwest::Url::parse(url).unwrap();
            assert_eq!(super::carries_keys(&parsed), carries, "{url}");
        }
    }
}

/// The service to act through.
#[derive(Debug, Args)]
pub struct ServerArg {
    /// The service's URL; the operator key is read from
    /// `CUSTODY_INDEXER_OPERATOR_KEY`.
    #[arg(long, env = "CUSTODY_INDEXER_SERVER")]
    pub server: Option<String>,
}

impl ServerArg {
    pub fn required(&self, what: &str) -> anyhow::Result<Server> {
        match &self.server {
            Some(url) => Server::from_env(url),
            None => bail!(
                "{what} goes through the service: pass --server URL (or set CUSTODY_INDEXER_SERVER) and an admin's \
                 key in CUSTODY_INDEXER_OPERATOR_KEY"
            ),
        }
    }
}
