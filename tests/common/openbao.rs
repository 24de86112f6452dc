//! OpenBao's dev server (in memory, unsealed, Transit enabled) on a free
//! port, and the variables that make a command sign with its Transit engine
//! and no other key source. `OPENBAO_BIN` names the `bao` binary
//! (scripts/install-openbao.sh installs it; scripts/test.sh sets it).

use std::{
    process::{Command, Stdio},
    time::Duration,
};

use alloy::transports::http::reqwest::Client;
use serde_json::{Value, json};

use super::{cli::Process, dead_port, eventually};

pub struct Bao {
    pub addr: String,
    token: String,
    dir: tempfile::TempDir,
    _server: Process,
}

impl Bao {
    pub async fn start() -> Self {
        let bin = std::env::var("OPENBAO_BIN").expect(
            "OPENBAO_BIN names the bao binary: scripts/install-openbao.sh installs it (scripts/test.sh runs it)",
        );
        let token = uuid::Uuid::new_v4().to_string();
        let addr = format!("127.0.0.1:{}", dead_port());
        let server = Command::new(bin)
            .args(["server", "-dev", "-dev-no-store-token"])
            .arg(format!("-dev-root-token-id={token}"))
            .arg(format!("-dev-listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("bao starts");
        let bao = Bao {
            addr: format!("http://{addr}"),
            token,
            dir: tempfile::tempdir().unwrap(),
            _server: Process(server),
        };
        let health = format!("{}/v1/sys/health", bao.addr);
        eventually(Duration::from_secs(30), "OpenBao's dev server", || async {
            let answer = Client::new().get(&health).send().await.ok()?;
            answer.status().is_success().then_some(())
        })
        .await;
        let (status, body) = bao.call("sys/mounts/transit", Some(json!({ "type": "transit" }))).await;
        assert!(status < 300, "Transit enabled: {status} {body}");
        std::fs::write(bao.dir.path().join("token"), format!("{}\n", bao.token)).unwrap();
        bao
    }

    /// `path` under `/v1/` as the root token: posted `body`, or a GET.
    pub async fn call(&self, path: &str, body: Option<Value>) -> (u16, Value) {
        let url = format!("{}/v1/{path}", self.addr);
        let client = Client::new();
        let request = match body {
            Some(body) => client.post(url).json(&body),
            None => client.get(url),
        };
        let answer = request.header("X-Vault-Token", &self.token).send().await.unwrap();
        let status = answer.status().as_u16();
        (status, answer.json().await.unwrap_or(Value::Null))
    }

    /// The base58 public key of the Transit key `name` (version 1).
    pub async fn public_key(&self, name: &str) -> String {
        use base64::Engine;
        let (status, body) = self.call(&format!("transit/keys/{name}"), None).await;
        assert_eq!(status, 200, "{name}: {body}");
        let key = body["data"]["keys"]["1"]["public_key"].as_str().unwrap();
        bs58::encode(base64::engine::general_purpose::STANDARD.decode(key).unwrap()).into_string()
    }

    /// The variables of a command signing with this engine, no mnemonic.
    pub fn vars(&self) -> Vec<(String, String)> {
        vec![
            ("CUSTODY_INDEXER_SIGNER".into(), "vault-transit".into()),
            ("CUSTODY_INDEXER_VAULT_ADDR".into(), self.addr.clone()),
            ("CUSTODY_INDEXER_VAULT_TOKEN_FILE".into(), self.dir.path().join("token").display().to_string()),
        ]
    }
}
