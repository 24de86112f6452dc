//! The service as the command line's deciding and managing commands reach
//! it: `--server URL` (or `CUSTODY_INDEXER_SERVER`), authenticated by the
//! operator key in `CUSTODY_INDEXER_OPERATOR_KEY` (an environment variable,
//! so that the key never shows in a process list or a shell history).

use alloy::transports::http::reqwest;
use anyhow::{Context, bail};
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
        let client = reqwest::Client::builder().timeout(std::time::Duration::from_secs(30)).build()?;
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

    fn url(&self, path: &str) -> anyhow::Result<reqwest::Url> {
        self.base.join(path).with_context(|| format!("{path} under {}", self.base))
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
