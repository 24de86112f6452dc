//! A stand-in for AWS KMS on a free port, speaking its JSON protocol
//! (`X-Amz-Target: TrentService.<Action>`, `application/x-amz-json-1.1`)
//! for the five actions the signer uses: `CreateKey`, `CreateAlias`,
//! `GetPublicKey`, `Sign` over real keys (secp256k1 answering DER ECDSA
//! signatures of a digest, Ed25519 signing a raw message), and nothing
//! else. No offline emulator signs KMS digests as KMS does (moto hashes
//! them again; LocalStack needs an online licence), hence this; the manual
//! run against AWS itself is in docs/configuration.md. It can stop
//! answering and come back with the same keys.

use std::{
    collections::HashMap,
    net::SocketAddr,
    sync::{Arc, Mutex},
};

use axum::{
    Router,
    extract::State,
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::post,
};
use base64::{Engine, engine::general_purpose::STANDARD};
use k256::ecdsa::{SigningKey, signature::hazmat::PrehashSigner};
use serde_json::{Value, json};
use solana_keypair::Keypair;
use solana_signer::Signer as _;

enum Key {
    Secp256k1(SigningKey),
    Ed25519(Keypair),
}

#[derive(Default)]
struct Keys {
    keys: HashMap<String, Key>,
    aliases: HashMap<String, String>,
    calls: Vec<String>,
}

pub struct Kms {
    pub addr: SocketAddr,
    keys: Arc<Mutex<Keys>>,
    server: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// SubjectPublicKeyInfo of a secp256k1 point and of an Ed25519 key.
const SECP256K1_SPKI: [u8; 23] = [
    0x30, 0x56, 0x30, 0x10, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x05, 0x2b, 0x81,
    0x04, 0x00, 0x0a, 0x03, 0x42, 0x00,
];
const ED25519_SPKI: [u8; 12] = [0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00];

fn error(kind: &str, message: &str) -> Response {
    let body = json!({ "__type": kind, "message": message }).to_string();
    (StatusCode::BAD_REQUEST, [("content-type", "application/x-amz-json-1.1")], body).into_response()
}

fn answer(body: Value) -> Response {
    (StatusCode::OK, [("content-type", "application/x-amz-json-1.1")], body.to_string()).into_response()
}

fn arn(id: &str) -> String {
    format!("arn:aws:kms:us-east-1:111122223333:key/{id}")
}

async fn call(State(keys): State<Arc<Mutex<Keys>>>, headers: HeaderMap, body: String) -> Response {
    let action = headers.get("x-amz-target").and_then(|v| v.to_str().ok()).unwrap_or_default();
    let action = action.strip_prefix("TrentService.").unwrap_or(action).to_string();
    let request: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let mut keys = keys.lock().unwrap();
    keys.calls.push(action.clone());
    let id_of = |keys: &Keys, name: &str| -> Option<String> {
        let name = name.rsplit_once(":key/").map_or(name, |(_, id)| id);
        keys.aliases.get(name).cloned().or_else(|| keys.keys.contains_key(name).then(|| name.to_string()))
    };
    match action.as_str() {
        "CreateKey" => {
            let id = uuid::Uuid::new_v4().to_string();
            let key = match request["KeySpec"].as_str() {
                Some("ECC_SECG_P256K1") => Key::Secp256k1(SigningKey::random(&mut rand_core())),
                Some("ECC_NIST_EDWARDS25519") => Key::Ed25519(Keypair::new()),
                other => return error("ValidationException", &format!("KeySpec {other:?}")),
            };
            keys.keys.insert(id.clone(), key);
            answer(json!({ "KeyMetadata": { "KeyId": id, "Arn": arn(&id), "KeyUsage": "SIGN_VERIFY",
                "KeySpec": request["KeySpec"], "Enabled": true, "KeyState": "Enabled" } }))
        }
        "CreateAlias" => {
            let alias = request["AliasName"].as_str().unwrap_or_default().to_string();
            let Some(target) = id_of(&keys, request["TargetKeyId"].as_str().unwrap_or_default()) else {
                return error("NotFoundException", "no such key");
            };
            if keys.aliases.contains_key(&alias) {
                return error("AlreadyExistsException", &format!("{alias} exists"));
            }
            keys.aliases.insert(alias, target);
            answer(json!({}))
        }
        "GetPublicKey" => {
            let Some(id) = id_of(&keys, request["KeyId"].as_str().unwrap_or_default()) else {
                return error("NotFoundException", "no such key or alias");
            };
            let (spki, spec) = match &keys.keys[&id] {
                Key::Secp256k1(key) => {
                    let point = key.verifying_key().to_encoded_point(false);
                    ([&SECP256K1_SPKI[..], point.as_bytes()].concat(), "ECC_SECG_P256K1")
                }
                Key::Ed25519(key) => {
                    ([&ED25519_SPKI[..], key.pubkey().as_ref()].concat(), "ECC_NIST_EDWARDS25519")
                }
            };
            answer(json!({ "KeyId": arn(&id), "PublicKey": STANDARD.encode(spki), "KeySpec": spec,
                "KeyUsage": "SIGN_VERIFY" }))
        }
        "Sign" => {
            let Some(id) = id_of(&keys, request["KeyId"].as_str().unwrap_or_default()) else {
                return error("NotFoundException", "no such key");
            };
            let message =
                STANDARD.decode(request["Message"].as_str().unwrap_or_default()).unwrap_or_default();
            let kind = (request["SigningAlgorithm"].as_str(), request["MessageType"].as_str());
            let signature = match (&keys.keys[&id], kind) {
                (Key::Secp256k1(key), (Some("ECDSA_SHA_256"), Some("DIGEST"))) if message.len() == 32 => {
                    let signature: k256::ecdsa::Signature = key.sign_prehash(&message).unwrap();
                    signature.to_der().as_bytes().to_vec()
                }
                (Key::Ed25519(key), (Some("ED25519_SHA_512"), Some("RAW"))) => {
                    key.sign_message(&message).as_ref().to_vec()
                }
                _ => return error("InvalidKeyUsageException", &format!("{kind:?} for this key")),
            };
            answer(json!({ "KeyId": arn(&id), "Signature": STANDARD.encode(signature),
                "SigningAlgorithm": request["SigningAlgorithm"] }))
        }
        other => error("UnsupportedOperationException", &format!("{other} is not in the stand-in")),
    }
}

fn rand_core() -> impl k256::elliptic_curve::rand_core::CryptoRngCore {
    k256::elliptic_curve::rand_core::OsRng
}

impl Kms {
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let kms =
            Kms { addr: listener.local_addr().unwrap(), keys: Arc::default(), server: Mutex::new(None) };
        kms.serve(listener);
        kms
    }

    fn serve(&self, listener: tokio::net::TcpListener) {
        let app = Router::new().route("/", post(call)).with_state(self.keys.clone());
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        *self.server.lock().unwrap() = Some(server);
    }

    /// Stops answering: connections are refused.
    pub fn stop(&self) {
        if let Some(server) = self.server.lock().unwrap().take() {
            server.abort();
        }
    }

    /// Answers again, at the same address, with the same keys.
    pub async fn resume(&self) {
        let listener = tokio::net::TcpListener::bind(self.addr).await.unwrap();
        self.serve(listener);
    }

    /// The aliases made, sorted.
    pub fn aliases(&self) -> Vec<String> {
        let mut aliases: Vec<String> = self.keys.lock().unwrap().aliases.keys().cloned().collect();
        aliases.sort();
        aliases
    }

    /// How many times `action` was called.
    pub fn calls(&self, action: &str) -> usize {
        self.keys.lock().unwrap().calls.iter().filter(|c| *c == action).count()
    }

    /// The variables of a command signing with this KMS and no other key
    /// source.
    pub fn vars(&self) -> Vec<(String, String)> {
        [
            ("CUSTODY_INDEXER_SIGNER", "aws-kms".to_string()),
            ("CUSTODY_INDEXER_KMS_ENDPOINT", format!("http://{}", self.addr)),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_ACCESS_KEY_ID", "AKIDSTANDIN".into()),
            ("AWS_SECRET_ACCESS_KEY", "stand-in-secret".into()),
            ("AWS_EC2_METADATA_DISABLED", "true".into()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }
}
