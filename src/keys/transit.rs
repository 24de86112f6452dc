//! Keys in an OpenBao or Vault Transit engine (`CUSTODY_INDEXER_SIGNER=vault-transit`):
//! Ed25519 keys for Solana, made in the engine and never exported, named
//! `custody-indexer.<role>.<owner>.<family>` (Transit names allow no
//! colon). Transit has no secp256k1: EVM keys are refused, and a service
//! with an EVM chain does not start with this backend.
//!
//! A key signs with its first version only (`key_version` 1) and its
//! address is that version's public key, so rotating a key in the engine
//! never moves an account's address. The token is read from a file into a
//! zeroized buffer and sent only as the `X-Vault-Token` header.

use std::{collections::HashMap, fmt, path::PathBuf, sync::Mutex, time::Duration};

use alloy::{
    primitives::{Address, B256, Signature},
    transports::http::reqwest::{self, Client},
};
use base64::{Engine, engine::general_purpose::STANDARD};
use futures::future::BoxFuture;
use serde_json::{Value, json};
use zeroize::Zeroizing;

use super::{Backend, KeyError, KeyRef, Scope, Signer};
use crate::chain::Family;

/// The variables' names after the scope's prefix (`CUSTODY_INDEXER_`,
/// or `CUSTODY_INDEXER_ISSUER_` for the issuer's own signer).
pub const ADDR_VAR: &str = "VAULT_ADDR";
pub const TOKEN_FILE_VAR: &str = "VAULT_TOKEN_FILE";
pub const MOUNT_VAR: &str = "VAULT_TRANSIT_MOUNT";

/// How long one call to the engine may take.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Where the engine is: its address, the token's file, the mount; and
/// whose variables named them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransitSettings {
    pub scope: Scope,
    pub addr: String,
    pub token_file: PathBuf,
    pub mount: String,
}

impl TransitSettings {
    /// The settings the environment gives; the mount defaults to `transit`.
    pub fn from_env() -> Result<Self, KeyError> {
        Self::from_vars(Scope::Main, |name| std::env::var(name).ok())
    }

    /// The settings `vars` gives by variable name, for `scope`.
    pub fn from_vars(scope: Scope, vars: impl Fn(&str) -> Option<String>) -> Result<Self, KeyError> {
        let var = |suffix: &str| vars(&scope.var(suffix)).filter(|v| !v.trim().is_empty());
        let addr = var(ADDR_VAR).ok_or_else(|| KeyError::Setting(scope.var(ADDR_VAR)))?;
        let addr = addr.trim().trim_end_matches('/').to_string();
        if !secure_or_loopback(&addr) {
            return Err(KeyError::BadSetting(
                scope.var(ADDR_VAR),
                "https://host[:port] (plain http:// only to this machine)",
            ));
        }
        Ok(TransitSettings {
            scope,
            addr,
            token_file: var(TOKEN_FILE_VAR)
                .ok_or_else(|| KeyError::Setting(scope.var(TOKEN_FILE_VAR)))?
                .into(),
            mount: var(MOUNT_VAR)
                .map_or_else(|| "transit".to_string(), |m| m.trim().trim_matches('/').to_string()),
        })
    }
}

/// Whether `address` is `https://host[:port]`, or plain `http://` to this
/// machine, without credentials in it: where a token or a signature
/// request may be sent.
pub fn secure_or_loopback(address: &str) -> bool {
    let Ok(parsed) = url::Url::parse(address) else { return false };
    let loopback =
        parsed.scheme() == "http" && matches!(parsed.host_str(), Some("127.0.0.1" | "localhost" | "[::1]"));
    let secure = parsed.scheme() == "https" && parsed.host_str().is_some();
    (secure || loopback) && parsed.username().is_empty() && parsed.password().is_none()
}

/// The engine's client, its token, and the public keys read so far.
pub struct TransitSigner {
    settings: TransitSettings,
    token: Zeroizing<String>,
    client: Client,
    known: Mutex<HashMap<KeyRef, [u8; 32]>>,
}

impl fmt::Debug for TransitSigner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TransitSigner").field("addr", &self.settings.addr).finish_non_exhaustive()
    }
}

/// A failure to reach the engine or of its answer: the service does not answer.
fn unreachable(what: &str) -> impl Fn(reqwest::Error) -> KeyError + '_ {
    // reqwest's error names the URL, which holds no secret here.
    move |error| KeyError::Service(format!("{what}: {error}"))
}

/// A client that follows no redirect: the token goes to the configured
/// server only.
fn client() -> Result<Client, KeyError> {
    Client::builder()
        .timeout(TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(unreachable("no HTTP client"))
}

/// Transit's name of a key.
pub fn name(key: KeyRef) -> String {
    super::describe(key, Family::Solana).replace(':', ".")
}

impl TransitSigner {
    /// The engine `settings` name, its token read from its file.
    pub fn open(settings: &TransitSettings) -> Result<Self, KeyError> {
        let bytes = Zeroizing::new(
            std::fs::read(&settings.token_file)
                .map_err(|source| KeyError::Read { path: settings.token_file.clone(), source })?,
        );
        let token = std::str::from_utf8(&bytes).map_err(|_| {
            KeyError::BadSetting(settings.scope.var(TOKEN_FILE_VAR), "a file holding the token as text")
        })?;
        let token = Zeroizing::new(token.trim().to_string());
        let client = client()?;
        Ok(TransitSigner { settings: settings.clone(), token, client, known: Mutex::default() })
    }

    fn url(&self, path: &str) -> String {
        format!("{}/v1/{}/{path}", self.settings.addr, self.settings.mount)
    }

    /// `body` posted (or, without one, a GET) to the engine's `path`: the
    /// answer's `data`.
    async fn call(&self, client: &Client, path: &str, body: Option<Value>) -> Result<Value, KeyError> {
        self.answer(client, path, body)
            .await?
            .ok_or_else(|| KeyError::Service(format!("{path}: 404 not found")))
    }

    /// As [`Self::call`], `None` when the engine answers 404 (no such key).
    async fn answer(
        &self,
        client: &Client,
        path: &str,
        body: Option<Value>,
    ) -> Result<Option<Value>, KeyError> {
        let request = match body {
            Some(body) => client.post(self.url(path)).json(&body),
            None => client.get(self.url(path)),
        };
        let mut token = reqwest::header::HeaderValue::from_str(self.token.as_str()).map_err(|_| {
            KeyError::BadSetting(self.settings.scope.var(TOKEN_FILE_VAR), "a file holding the token as text")
        })?;
        token.set_sensitive(true);
        let answer = request.header("X-Vault-Token", token).send().await.map_err(unreachable("no answer"))?;
        let status = answer.status();
        if status == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        let body: Value = answer.json().await.unwrap_or(Value::Null);
        if !status.is_success() {
            let errors = body["errors"]
                .as_array()
                .map(|e| e.iter().filter_map(Value::as_str).collect::<Vec<_>>().join("; "));
            return Err(KeyError::Service(format!("{path}: {status} {}", errors.unwrap_or_default())));
        }
        Ok(Some(body["data"].clone()))
    }

    /// The key's first public key: made in the engine when missing
    /// (creating an existing key changes nothing), refused unless Ed25519.
    async fn public_key(&self, client: &Client, key: KeyRef) -> Result<[u8; 32], KeyError> {
        let name = name(key);
        let data = self.call(client, &format!("keys/{name}"), Some(json!({ "type": "ed25519" }))).await?;
        if data["type"] != "ed25519" {
            return Err(KeyError::Service(format!("{name} is a {} key, not ed25519", data["type"])));
        }
        let public = data["keys"]["1"]["public_key"].as_str().unwrap_or_default();
        let bytes = STANDARD.decode(public).unwrap_or_default();
        bytes
            .try_into()
            .map_err(|_| KeyError::Service(format!("{name} has no Ed25519 public key of version 1")))
    }

    /// The key's public key: known, or read (or made) on a thread of its
    /// own, so that this works from any caller, async or not.
    fn known_or_read(&self, key: KeyRef) -> Result<[u8; 32], KeyError> {
        if let Some(public) = self.known.lock().expect("key cache lock").get(&key) {
            return Ok(*public);
        }
        let read = self.blocking(|client| async move { self.public_key(&client, key).await })?;
        self.known.lock().expect("key cache lock").insert(key, read);
        Ok(read)
    }

    /// `call` run apart ([`super::apart`]) with a client of its own
    /// runtime (connections stay with it).
    fn blocking<'a, T: Send, F>(&'a self, call: impl FnOnce(Client) -> F + Send) -> Result<T, KeyError>
    where
        F: std::future::Future<Output = Result<T, KeyError>> + 'a,
    {
        super::apart::run(|| async move { call(client()?).await }, KeyError::Service)
    }
}

impl Signer for TransitSigner {
    fn backend(&self) -> Backend {
        Backend::VaultTransit { mount: self.settings.mount.clone() }
    }

    fn evm_address(&self, key: KeyRef) -> Result<Address, KeyError> {
        Err(KeyError::NoSecp256k1(super::describe(key, Family::Evm)))
    }

    fn solana_address(&self, key: KeyRef) -> Result<String, KeyError> {
        Ok(bs58::encode(self.known_or_read(key)?).into_string())
    }

    fn holds(&self, key: KeyRef, family: Family) -> Result<bool, KeyError> {
        // Transit signs Ed25519 alone.
        if crate::family::rules::curve(family) != crate::chain::Curve::Ed25519 {
            return Ok(false);
        }
        if self.known.lock().expect("key cache lock").contains_key(&key) {
            return Ok(true);
        }
        self.blocking(|client| async move {
            Ok(self.answer(&client, &format!("keys/{}", name(key)), None).await?.is_some())
        })
    }

    fn sign_evm_hash(&self, key: KeyRef, _: B256) -> BoxFuture<'_, Result<Signature, KeyError>> {
        Box::pin(async move { Err(KeyError::NoSecp256k1(super::describe(key, Family::Evm))) })
    }

    fn sign_solana(&self, key: KeyRef, message: Vec<u8>) -> BoxFuture<'_, Result<[u8; 64], KeyError>> {
        Box::pin(async move {
            let known = self.known.lock().expect("key cache lock").get(&key).copied();
            if known.is_none() {
                let public = self.public_key(&self.client, key).await?;
                self.known.lock().expect("key cache lock").insert(key, public);
            }
            let body = json!({ "input": STANDARD.encode(&message), "key_version": 1 });
            let data = self.call(&self.client, &format!("sign/{}", name(key)), Some(body)).await?;
            let signature = data["signature"].as_str().unwrap_or_default();
            let raw =
                signature.strip_prefix("vault:v1:").and_then(|s| STANDARD.decode(s).ok()).unwrap_or_default();
            raw.try_into().map_err(|_| {
                KeyError::Service(format!("sign/{}: no Ed25519 signature of version 1", name(key)))
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_goes_over_https_or_to_this_machine_only() {
        for (addr, fine) in [
            ("https://bao.example.com:8200", true),
            ("http://127.0.0.1:8200/", true),
            ("http://localhost:8200", true),
            ("http://bao.example.com:8200", false),
            ("http://127.0.0.1.evil.example", false),
            ("http://localhost@evil.example", false),
            ("https://user:pass@bao.example.com", false),
            ("ftp://127.0.0.1", false),
        ] {
            let vars = |name: &str| match name {
                "CUSTODY_INDEXER_VAULT_ADDR" => Some(addr.to_string()),
                "CUSTODY_INDEXER_VAULT_TOKEN_FILE" => Some("/run/bao-token".to_string()),
                _ => None,
            };
            assert_eq!(TransitSettings::from_vars(Scope::Main, vars).is_ok(), fine, "{addr}");
        }
    }

    #[test]
    fn keys_are_named_without_colons() {
        assert_eq!(name(KeyRef::Account(7)), "custody-indexer.account.7.solana");
        assert_eq!(name(KeyRef::Issuer), "custody-indexer.issuer.platform.solana");
    }
}
