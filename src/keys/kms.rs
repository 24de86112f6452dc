//! Keys in AWS KMS (`CUSTODY_INDEXER_SIGNER=aws-kms`, cargo feature
//! `aws-kms`): made in KMS, never exported, one per key and family, named
//! by the alias `alias/custody-indexer/<role>/<owner>/<family>`. EVM keys
//! are `ECC_SECG_P256K1` and sign a digest through `alloy-signer-aws`
//! (`ECDSA_SHA_256`, `MessageType=DIGEST`; low `s`, the recovery id found
//! by recovery); Solana keys are `ECC_NIST_EDWARDS25519` and sign the
//! message with `ED25519_SHA_512`, `MessageType=RAW`.
//!
//! Credentials and region come from the standard `AWS_*` variables (or
//! the instance's role); `CUSTODY_INDEXER_KMS_ENDPOINT` points the client
//! elsewhere (`https://…`, or plain `http://` to this machine). An alias is
//! unique in an account, so two processes making one key at once end with
//! the alias on one of them, which both use.

use std::{collections::HashMap, fmt, sync::Arc, sync::Mutex};

use alloy::primitives::{Address, B256, Signature};
use alloy_signer_aws::AwsSigner;
use aws_sdk_kms::{
    Client,
    error::ProvideErrorMetadata,
    primitives::Blob,
    types::{KeySpec, KeyUsageType, MessageType, SigningAlgorithmSpec},
};
use futures::future::BoxFuture;

use super::{Backend, KeyError, KeyRef, Scope, Signer, describe};
use crate::{
    chain::{Curve, Family},
    family::rules::curve,
};

/// The variable pointing the client at another endpoint (after the
/// scope's prefix).
pub const ENDPOINT_VAR: &str = "KMS_ENDPOINT";

/// How long one KMS operation (its retries included) may take.
const OPERATION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Ed25519's SubjectPublicKeyInfo before its 32 bytes.
const ED25519_SPKI: [u8; 12] = [0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KmsSettings {
    pub endpoint: Option<String>,
}

impl KmsSettings {
    /// The settings `vars` gives by variable name, for `scope`.
    pub fn from_vars(scope: Scope, vars: impl Fn(&str) -> Option<String>) -> Result<Self, KeyError> {
        let name = scope.var(ENDPOINT_VAR);
        let endpoint =
            vars(&name).map(|v| v.trim().trim_end_matches('/').to_string()).filter(|v| !v.is_empty());
        if let Some(endpoint) = &endpoint
            && !super::transit::secure_or_loopback(endpoint)
        {
            return Err(KeyError::BadSetting(
                name,
                "https://host[:port] (plain http:// only to this machine)",
            ));
        }
        Ok(KmsSettings { endpoint })
    }
}

/// A key found in KMS: its id, and its public key as the chain names it
/// (the uncompressed secp256k1 point; Ed25519's 32 bytes).
#[derive(Clone)]
struct Known {
    id: String,
    public: Vec<u8>,
}

pub struct KmsSigner {
    settings: KmsSettings,
    /// The client of the runtime that signs, made at its first signature.
    client: tokio::sync::OnceCell<Client>,
    known: Mutex<HashMap<(KeyRef, Family), Known>>,
    evm: tokio::sync::Mutex<HashMap<KeyRef, Arc<AwsSigner>>>,
}

impl fmt::Debug for KmsSigner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KmsSigner").field("endpoint", &self.settings.endpoint).finish_non_exhaustive()
    }
}

/// KMS's name of a key: colons are not allowed in an alias.
pub fn alias(key: KeyRef, family: Family) -> String {
    format!("alias/{}", describe(key, family).replace(':', "/"))
}

/// A failure of KMS or of the way to it: the signer does not answer.
fn failed(what: &str, error: impl ProvideErrorMetadata + fmt::Display) -> KeyError {
    let code = error.code().unwrap_or("no answer");
    KeyError::Service(format!("KMS {what}: {code}: {}", error.message().unwrap_or(&error.to_string())))
}

impl KmsSigner {
    pub fn open(settings: &KmsSettings) -> Result<Self, KeyError> {
        Ok(KmsSigner {
            settings: settings.clone(),
            client: tokio::sync::OnceCell::new(),
            known: Mutex::default(),
            evm: tokio::sync::Mutex::default(),
        })
    }

    /// A client configured by the standard AWS variables and the endpoint.
    async fn new_client(&self) -> Client {
        // A KMS that does not answer is an outage, never a held caller.
        let timeouts =
            aws_config::timeout::TimeoutConfig::builder().operation_timeout(OPERATION_TIMEOUT).build();
        let mut config = aws_config::defaults(aws_config::BehaviorVersion::latest()).timeout_config(timeouts);
        if let Some(endpoint) = &self.settings.endpoint {
            config = config.endpoint_url(endpoint);
        }
        Client::new(&config.load().await)
    }

    async fn client(&self) -> &Client {
        self.client.get_or_init(|| self.new_client()).await
    }

    /// The key for `key` and `family`: found by its alias, or (when `make`)
    /// made and given the alias; `None` when missing and not made.
    async fn find(
        &self,
        client: &Client,
        key: KeyRef,
        family: Family,
        make: bool,
    ) -> Result<Option<Known>, KeyError> {
        let alias = alias(key, family);
        match client.get_public_key().key_id(&alias).send().await {
            Ok(answer) => return Ok(Some(known(key, family, answer.key_id, answer.public_key)?)),
            Err(error) if error.code() == Some("NotFoundException") => {}
            Err(error) => return Err(failed("GetPublicKey", error)),
        }
        if !make {
            return Ok(None);
        }
        let spec = match curve(family) {
            Curve::Secp256k1 => KeySpec::EccSecgP256K1,
            Curve::Ed25519 => KeySpec::EccNistEdwards25519,
        };
        let made = client
            .create_key()
            .key_spec(spec)
            .key_usage(KeyUsageType::SignVerify)
            .description(describe(key, family))
            .send()
            .await
            .map_err(|e| failed("CreateKey", e))?;
        let id = made
            .key_metadata
            .map(|m| m.key_id)
            .ok_or_else(|| KeyError::Service("KMS made a key without an id".into()))?;
        match client.create_alias().alias_name(&alias).target_key_id(&id).send().await {
            Ok(_) => tracing::info!(%alias, "signer: key made in KMS"),
            // Another process named its key first: that one is the key.
            Err(error) if error.code() == Some("AlreadyExistsException") => {
                tracing::warn!(%alias, unused = %id, "signer: another process made this key first; schedule the unused one's deletion");
            }
            Err(error) => return Err(failed("CreateAlias", error)),
        }
        let answer =
            client.get_public_key().key_id(&alias).send().await.map_err(|e| failed("GetPublicKey", e))?;
        Ok(Some(known(key, family, answer.key_id, answer.public_key)?))
    }

    /// The key, known or found (made when missing) apart from the caller.
    fn known_or_find(&self, key: KeyRef, family: Family) -> Result<Known, KeyError> {
        if let Some(known) = self.known.lock().expect("key cache lock").get(&(key, family)) {
            return Ok(known.clone());
        }
        let found = super::apart::run(
            || async move {
                let client = self.new_client().await;
                self.find(&client, key, family, true).await
            },
            KeyError::Service,
        )?
        .ok_or_else(|| KeyError::Service(format!("KMS has no key {}", alias(key, family))))?;
        self.known.lock().expect("key cache lock").insert((key, family), found.clone());
        Ok(found)
    }

    /// The key on the signing runtime's client, made when missing.
    async fn key(&self, key: KeyRef, family: Family) -> Result<Known, KeyError> {
        if let Some(known) = self.known.lock().expect("key cache lock").get(&(key, family)) {
            return Ok(known.clone());
        }
        let found = self.find(self.client().await, key, family, true).await?;
        let found =
            found.ok_or_else(|| KeyError::Service(format!("KMS has no key {}", alias(key, family))))?;
        self.known.lock().expect("key cache lock").insert((key, family), found.clone());
        Ok(found)
    }

    /// The alloy signer of an EVM key, made once.
    async fn evm_signer(&self, key: KeyRef) -> Result<Arc<AwsSigner>, KeyError> {
        let mut signers = self.evm.lock().await;
        if let Some(signer) = signers.get(&key) {
            return Ok(signer.clone());
        }
        let known = self.key(key, Family::Evm).await?;
        let signer = AwsSigner::new(self.client().await.clone(), known.id, None)
            .await
            .map_err(|e| KeyError::Service(format!("KMS: {e}")))?;
        let signer = Arc::new(signer);
        signers.insert(key, signer.clone());
        Ok(signer)
    }
}

/// The key `id` answered with `spki`, its public key read as the family
/// names it.
fn known(key: KeyRef, family: Family, id: Option<String>, spki: Option<Blob>) -> Result<Known, KeyError> {
    let bad =
        || KeyError::Service(format!("KMS answered no {family:?} public key for {}", alias(key, family)));
    let (id, spki) = (id.ok_or_else(bad)?, spki.ok_or_else(bad)?.into_inner());
    let public = match curve(family) {
        Curve::Secp256k1 => {
            let point = spki.get(spki.len().saturating_sub(65)..).ok_or_else(bad)?;
            // secp256k1's OID, and an uncompressed point.
            let curve = spki.windows(5).any(|w| w == [0x2b, 0x81, 0x04, 0x00, 0x0a]);
            (curve && point.first() == Some(&0x04)).then(|| point.to_vec()).ok_or_else(bad)?
        }
        Curve::Ed25519 => {
            spki.strip_prefix(&ED25519_SPKI).filter(|p| p.len() == 32).ok_or_else(bad)?.to_vec()
        }
    };
    Ok(Known { id, public })
}

impl Signer for KmsSigner {
    fn backend(&self) -> Backend {
        Backend::AwsKms
    }

    fn evm_address(&self, key: KeyRef) -> Result<Address, KeyError> {
        Ok(Address::from_raw_public_key(&self.known_or_find(key, Family::Evm)?.public[1..]))
    }

    fn solana_address(&self, key: KeyRef) -> Result<String, KeyError> {
        Ok(bs58::encode(self.known_or_find(key, Family::Solana)?.public).into_string())
    }

    fn holds(&self, key: KeyRef, family: Family) -> Result<bool, KeyError> {
        if self.known.lock().expect("key cache lock").contains_key(&(key, family)) {
            return Ok(true);
        }
        let found = super::apart::run(
            || async move {
                let client = self.new_client().await;
                self.find(&client, key, family, false).await
            },
            KeyError::Service,
        )?;
        Ok(found.is_some())
    }

    fn sign_evm_hash(&self, key: KeyRef, hash: B256) -> BoxFuture<'_, Result<Signature, KeyError>> {
        Box::pin(async move {
            let signer = self.evm_signer(key).await?;
            alloy::signers::Signer::sign_hash(signer.as_ref(), &hash)
                .await
                .map_err(|e| KeyError::Service(format!("KMS Sign: {e}")))
        })
    }

    fn sign_solana(&self, key: KeyRef, message: Vec<u8>) -> BoxFuture<'_, Result<[u8; 64], KeyError>> {
        Box::pin(async move {
            let known = self.key(key, Family::Solana).await?;
            let answer = self
                .client()
                .await
                .sign()
                .key_id(known.id)
                .message(Blob::new(message))
                .message_type(MessageType::Raw)
                .signing_algorithm(SigningAlgorithmSpec::Ed25519Sha512)
                .send()
                .await
                .map_err(|e| failed("Sign", e))?;
            let raw = answer.signature.map(Blob::into_inner).unwrap_or_default();
            raw.try_into()
                .map_err(|_| KeyError::BadSignature("KMS answered no 64-byte Ed25519 signature".into()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_named_by_aliases_without_colons() {
        assert_eq!(alias(KeyRef::Account(7), Family::Evm), "alias/custody-indexer/account/7/evm");
        assert_eq!(alias(KeyRef::Issuer, Family::Solana), "alias/custody-indexer/issuer/platform/solana");
    }

    #[test]
    fn the_endpoint_is_https_or_this_machine() {
        for (endpoint, fine) in [
            ("https://kms.eu-west-1.amazonaws.com", true),
            ("http://127.0.0.1:4599", true),
            ("http://kms.example", false),
        ] {
            let vars = |name: &str| (name == "CUSTODY_INDEXER_KMS_ENDPOINT").then(|| endpoint.to_string());
            assert_eq!(KmsSettings::from_vars(Scope::Main, vars).is_ok(), fine, "{endpoint}");
        }
    }

    #[test]
    fn public_keys_are_read_from_their_spki() {
        let ed = [&ED25519_SPKI[..], &[7u8; 32]].concat();
        let found = known(KeyRef::Sponsor, Family::Solana, Some("k".into()), Some(Blob::new(ed))).unwrap();
        assert_eq!(found.public, [7u8; 32]);
        let short = [&ED25519_SPKI[..], &[7u8; 31]].concat();
        assert!(known(KeyRef::Sponsor, Family::Solana, Some("k".into()), Some(Blob::new(short))).is_err());
        let secp = [
            &[0x30, 0x56, 0x30, 0x10, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x05][..],
            &[0x2b, 0x81, 0x04, 0x00, 0x0a, 0x03, 0x42, 0x00, 0x04],
            &[9u8; 64],
        ]
        .concat();
        let found = known(KeyRef::Sponsor, Family::Evm, Some("k".into()), Some(Blob::new(secp))).unwrap();
        assert_eq!(found.public.len(), 65);
        assert!(known(KeyRef::Sponsor, Family::Evm, Some("k".into()), None).is_err());
    }
}
