//! Signed requests through real HTTP on a random port: an API key paired
//! with a P-256 or Ed25519 public key must sign every request with
//! `X-Request-Signature`; each refusal names its check; a token is accepted
//! once, across instances sharing a PostgreSQL store.

use crate::common;

use alloy::transports::http::reqwest::Method;
use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use common::{
    api::{Answer, App, send_raw, spawn_app, spawn_configured},
    chain_toml,
    cli::Env,
    db::{BACKENDS, Backend, TestDb},
    signing::{ClientKey, claims},
};
use custody_indexer::{
    api::RateLimit,
    api_key::{
        self,
        requests::{purge_request_tokens, record_request_token},
    },
    config::Chains,
    environment::Environment,
    operators::tenants::create_bare_organization,
    request_signature::PublicKey,
};
use jsonwebtoken::{EncodingKey, Header};
use serde_json::{Value, json};

async fn app(backend: Backend) -> App {
    spawn_app(backend, Chains::load(None).unwrap(), RateLimit::default()).await
}

/// A key of organization `acme` paired with `client`'s public key: its
/// token and id.
async fn paired_key(app: &App, client: &ClientKey) -> (String, String) {
    let token = app.key("acme").await;
    let id = api_key::key_id(&token).unwrap().to_string();
    custody_indexer::api_key::manage::pair(
        app.store(),
        &id,
        &PublicKey::from_pem(&client.public_pem).unwrap(),
        &custody_indexer::audit::Actor::System,
    )
    .await
    .unwrap();
    (token, id)
}

/// `method path` with `body` (JSON text, none when empty) and, when given,
/// `X-Request-Signature: signature`.
async fn call(
    base: &str,
    token: &str,
    method: &str,
    path: &str,
    body: &str,
    signature: Option<&str>,
) -> Answer {
    let headers: Vec<(&str, &str)> = signature.map(|s| ("x-request-signature", s)).into_iter().collect();
    let body = (!body.is_empty()).then(|| body.to_string());
    let method = Method::from_bytes(method.as_bytes()).unwrap();
    send_raw(method, &format!("{base}{path}"), Some(token), body, &headers).await
}

/// `method path` signed by `client` as a client does.
async fn signed(
    app: &App,
    client: &ClientKey,
    key: (&str, &str),
    method: &str,
    path: &str,
    body: &str,
) -> Answer {
    let signature = client.sign(&claims(key.1, method, path, body));
    call(&app.base, key.0, method, path, body, Some(&signature)).await
}

/// A `401 INVALID_SIGNATURE` whose message contains `mentions` and none of
/// `token`'s parts.
fn refused(answer: &Answer, mentions: &str, token: &str) {
    assert_eq!(answer.status, 401, "{mentions}: {answer:?}");
    assert_eq!(answer.body["code"], "INVALID_SIGNATURE", "{mentions}: {answer:?}");
    let message = answer.body["message"].as_str().unwrap();
    assert!(message.contains(mentions), "{mentions}: {message}");
    for part in token.split('.').filter(|part| part.len() > 3) {
        assert!(!message.contains(part), "{mentions}: the message echoes the token: {message}");
    }
}

#[tokio::test]
async fn a_paired_key_must_sign_each_request_with_es256_or_eddsa_in_both_environments() {
    for environment in [Environment::Production, Environment::Sandbox] {
        let app = spawn_configured(Backend::Sqlite, Chains::load(None).unwrap(), |state| {
            state.with_compliance(environment, Default::default())
        })
        .await;
        signed_requests_are_served(&app).await;
    }
}

async fn signed_requests_are_served(app: &App) {
    let unpaired = app.key("acme").await;
    for client in [ClientKey::p256(), ClientKey::ed25519()] {
        let (token, id) = paired_key(app, &client).await;
        let key = (token.as_str(), id.as_str());

        let unsigned = call(&app.base, &token, "GET", "/v2/identities?limit=5", "", None).await;
        refused(&unsigned, "missing X-Request-Signature", "");

        let body =
            json!({ "request_id": format!("r-{id}"), "type": "INDIVIDUAL", "label": "Ada" }).to_string();
        let created = signed(app, &client, key, "POST", "/v2/identities", &body).await;
        assert_eq!(created.status, 201, "{:?}: {created:?}", client.algorithm);
        assert_eq!(created.body["label"], "Ada", "the handler got the body that was signed");

        let listed = signed(app, &client, key, "GET", "/v2/identities?limit=25", "").await;
        assert_eq!(listed.status, 200, "{:?}: {listed:?}", client.algorithm);
        assert!(listed.body["identities"].as_array().unwrap().iter().any(|i| i["id"] == created.body["id"]));
    }
    let answer = app.get("/v2/identities", &unpaired).await;
    assert_eq!(answer.status, 200, "a key that is not paired needs no signature: {answer:?}");
}

#[tokio::test]
async fn each_refused_signature_names_its_check_and_never_echoes_the_token() {
    let app = app(Backend::Sqlite).await;
    let client = ClientKey::p256();
    let (token, id) = paired_key(&app, &client).await;
    let (path, body) = ("/v2/identities?limit=5", "");
    let fresh = || claims(&id, "GET", path, body);
    let with = |fields: &[(&str, Value)]| {
        let mut claims = fresh();
        for (field, value) in fields {
            claims[*field] = value.clone();
        }
        client.sign(&claims)
    };
    let now = chrono::Utc::now().timestamp();
    let unsigned = |alg: &str| {
        let header = URL_SAFE_NO_PAD.encode(json!({ "alg": alg, "typ": "JWT" }).to_string());
        format!("{header}.{}.", URL_SAFE_NO_PAD.encode(fresh().to_string()))
    };
    let hs256 = jsonwebtoken::encode(
        &Header::new(jsonwebtoken::Algorithm::HS256),
        &fresh(),
        &EncodingKey::from_secret(token.as_bytes()),
    )
    .unwrap();
    let mut tampered = client.sign(&fresh());
    tampered.replace_range(tampered.len() - 4.., "AAAA");

    let replayed = client.sign(&fresh());
    let first = call(&app.base, &token, "GET", path, body, Some(&replayed)).await;
    assert_eq!(first.status, 200, "{first:?}");

    for (signature, mentions) in [
        (replayed, "jti was used before"),
        (with(&[("iat", json!(now - 100)), ("exp", json!(now - 35))]), "expired"),
        (with(&[("iat", json!(now + 60)), ("exp", json!(now + 120))]), "not yet valid"),
        (with(&[("iat", json!(now)), ("exp", json!(now + 121))]), "at most 120 s"),
        (with(&[("method", json!("POST"))]), "method"),
        (with(&[("uri", json!("/v2/identities?limit=6"))]), "uri"),
        (with(&[("uri", json!("/v2/identities"))]), "uri"),
        (with(&[("body_hash", json!(format!("{:064x}", 0)))]), "body_hash"),
        (with(&[("sub", json!("0".repeat(32)))]), "sub"),
        (with(&[("jti", json!(""))]), "jti"),
        (unsigned("none"), "alg is not accepted"),
        (hs256, "alg is not accepted"),
        (ClientKey::ed25519().sign(&fresh()), "takes ES256"),
        (ClientKey::p256().sign(&fresh()), "does not verify"),
        (tampered, "does not verify"),
        ("not-a-token".to_string(), "malformed"),
    ] {
        let answer = call(&app.base, &token, "GET", path, body, Some(&signature)).await;
        refused(&answer, mentions, &signature);
    }

    // A body other than the signed one, on a POST.
    let signed_body = json!({ "request_id": "r-1", "type": "INDIVIDUAL", "label": "Ada" }).to_string();
    let signature = client.sign(&claims(&id, "POST", "/v2/identities", &signed_body));
    let sent_body = signed_body.replace("Ada", "Eve");
    let answer = call(&app.base, &token, "POST", "/v2/identities", &sent_body, Some(&signature)).await;
    refused(&answer, "body_hash", &signature);
}

#[tokio::test]
async fn a_token_accepted_by_one_instance_is_refused_by_another_sharing_the_store() {
    let app = app(Backend::Postgres).await;
    let other = app.another_server(Chains::load(None).unwrap()).await;
    let client = ClientKey::ed25519();
    let (token, id) = paired_key(&app, &client).await;
    let signature = client.sign(&claims(&id, "GET", "/v2/identities?limit=5", ""));

    let first = call(&app.base, &token, "GET", "/v2/identities?limit=5", "", Some(&signature)).await;
    assert_eq!(first.status, 200, "{first:?}");
    let replay = call(&other.base, &token, "GET", "/v2/identities?limit=5", "", Some(&signature)).await;
    refused(&replay, "jti was used before", &signature);

    let fresh = client.sign(&claims(&id, "GET", "/v2/identities?limit=5", ""));
    let answer = call(&other.base, &token, "GET", "/v2/identities?limit=5", "", Some(&fresh)).await;
    assert_eq!(answer.status, 200, "the other instance serves fresh tokens: {answer:?}");
}

/// A fresh store of `backend` holding one key of organization `acme`: the
/// store and the key's id.
async fn store_with_key(backend: Backend) -> (TestDb, String) {
    let db = TestDb::new(backend).await;
    create_bare_organization(&db.store, "acme", None).await.unwrap();
    let secret = api_key::generate();
    custody_indexer::api_key::manage::create_with(
        &db.store,
        "acme",
        "test",
        (&secret.id, &secret.hash),
        &custody_indexer::audit::Actor::System,
    )
    .await
    .unwrap();
    (db, secret.id)
}

#[tokio::test]
async fn token_ids_are_kept_until_their_time_then_purged() {
    let skew = custody_indexer::store::INSTANCE_SKEW_SECS;
    for backend in BACKENDS {
        let (db, key) = store_with_key(backend).await;
        let store = &db.store;
        let now = chrono::Utc::now().timestamp();
        assert!(record_request_token(store, &key, "j-1", now + 90, now).await.unwrap());
        assert!(record_request_token(store, &key, "j-2", now - skew - 10, now).await.unwrap());
        assert!(
            !record_request_token(store, &key, "j-1", now + 95, now).await.unwrap(),
            "{backend:?}: replay"
        );
        assert_eq!(
            purge_request_tokens(store, now).await.unwrap(),
            1,
            "{backend:?}: only j-2 is past its time on every instance's clock"
        );
        // Past its time by this clock, not by the skew others may have.
        assert!(!record_request_token(store, &key, "j-1", now + 95, now + 91).await.unwrap(), "{backend:?}");
        assert!(
            record_request_token(store, &key, "j-2", now + 90, now).await.unwrap(),
            "{backend:?}: purged"
        );
        if backend == Backend::Sqlite {
            // SQLite serves one instance, whose clock judges.
            let past = now + 91 + skew;
            assert!(record_request_token(store, &key, "j-1", past + 90, past).await.unwrap(), "{backend:?}");
        }
    }
}

#[tokio::test]
async fn pairing_is_listed_refused_for_revoked_keys_and_undone_by_unpairing() {
    for backend in BACKENDS {
        let (db, key) = store_with_key(backend).await;
        let store = &db.store;
        let public_key = PublicKey::from_pem(&ClientKey::ed25519().public_pem).unwrap();
        let paired = custody_indexer::api_key::manage::pair(
            store,
            &key,
            &public_key,
            &custody_indexer::audit::Actor::System,
        )
        .await
        .unwrap();
        assert_eq!(paired.signature_algorithm.map(|a| a.as_str()), Some("EdDSA"), "{backend:?}");
        let credentials = store.active_api_key(&key).await.unwrap().unwrap();
        assert_eq!(credentials.public_key.as_ref(), Some(&public_key), "{backend:?}");
        let listed = serde_json::to_value(store.api_keys(Some("acme")).await.unwrap()).unwrap();
        assert_eq!(listed[0]["signature_algorithm"], "EdDSA", "{backend:?}");

        let unpaired =
            custody_indexer::api_key::manage::unpair(store, &key, &custody_indexer::audit::Actor::System)
                .await
                .unwrap();
        assert_eq!((unpaired.signature_algorithm, unpaired.paired_at), (None, None), "{backend:?}");
        assert!(store.active_api_key(&key).await.unwrap().unwrap().public_key.is_none());
        custody_indexer::api_key::manage::revoke(store, &key, &custody_indexer::audit::Actor::System)
            .await
            .unwrap();
        let error = custody_indexer::api_key::manage::pair(
            store,
            &key,
            &public_key,
            &custody_indexer::audit::Actor::System,
        )
        .await
        .unwrap_err();
        assert!(error.to_string().contains("revoked"), "{backend:?}: {error}");
        // Revoking or unpairing again records nothing more.
        custody_indexer::api_key::manage::revoke(store, &key, &custody_indexer::audit::Actor::System)
            .await
            .unwrap();
        custody_indexer::api_key::manage::unpair(store, &key, &custody_indexer::audit::Actor::System)
            .await
            .unwrap();
        let logged: Vec<(String, String, Option<String>)> = store
            .audit_entries(0, Some("acme"), 100)
            .await
            .unwrap()
            .into_iter()
            .map(|e| (e.action, e.target_id, e.organization_id))
            .collect();
        let expected: Vec<_> = ["api_key.created", "api_key.paired", "api_key.unpaired", "api_key.revoked"]
            .iter()
            .map(|action| (action.to_string(), key.clone(), Some("acme".to_string())))
            .collect();
        assert_eq!(logged, expected, "{backend:?}: every key event, once, in the organization's log");
    }
}

#[tokio::test]
async fn the_openapi_document_describes_the_signature_header() {
    let app = app(Backend::Sqlite).await;
    let doc = common::api::send(Method::GET, &format!("{}/openapi.json", app.base), None).await.body;
    let scheme = &doc["components"]["securitySchemes"]["request_signature"];
    assert_eq!(
        (&scheme["type"], &scheme["in"], &scheme["name"]),
        (&json!("apiKey"), &json!("header"), &json!("X-Request-Signature"))
    );
    let description = scheme["description"].as_str().unwrap();
    for claim in [
        "ES256",
        "EdDSA",
        "`sub`",
        "`method`",
        "`uri`",
        "`body_hash`",
        "`iat`",
        "`exp`",
        "`jti`",
        "INVALID_SIGNATURE",
    ] {
        assert!(description.contains(claim), "{claim}: {description}");
    }
    assert!(
        doc["security"].as_array().unwrap().contains(&json!({ "api_key": [], "request_signature": [] })),
        "{}",
        doc["security"]
    );
}

// The CLI runs while this test waits for it, blocking its thread: the
// app's workers run on another, so none keeps SQLite's write lock (a
// transaction begun before the CLI started) until the CLI gives up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_pair_list_and_unpair_keys_with_the_cli() {
    let app = app(Backend::Sqlite).await;
    let mut env = Env::with_chain_file(&chain_toml(&["http://127.0.0.1:1".into()], None, ""));
    env.database_url = app.db.url.clone();
    // The test's own server checks keys: no pepper, as it has none.
    env.without_key_pepper();
    let token = app.key("acme").await;
    let id = api_key::key_id(&token).unwrap().to_string();
    let client = ClientKey::p256();
    let file = env.dir.path().join("client.pub.pem");
    std::fs::write(&file, &client.public_pem).unwrap();
    let file = file.to_str().unwrap();

    let out = env.ok(&["api-keys", "pair", &id, "--public-key-file", file]);
    assert!(out.contains(&id) && out.contains("paired ES256"), "{out}");
    let listed = env.ok(&["api-keys", "list", "--organization", "acme"]);
    assert!(listed.contains("paired ES256"), "{listed}");
    let json: Value = serde_json::from_str(&env.ok(&["api-keys", "list", "--json"])).unwrap();
    assert_eq!(json[0]["signature_algorithm"], "ES256", "{json}");
    let unsigned = call(&app.base, &token, "GET", "/v2/identities", "", None).await;
    refused(&unsigned, "missing X-Request-Signature", "");

    let private = env.dir.path().join("client.pem");
    std::fs::write(
        &private,
        "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA==\n-----END PRIVATE KEY-----\n",
    )
    .unwrap();
    for (args, mentions) in [
        (["api-keys", "pair", &id, "--public-key-file", private.to_str().unwrap()], "private key"),
        (["api-keys", "pair", &id, "--public-key-file", "/nonexistent.pem"], "cannot read"),
        (["api-keys", "pair", &"f".repeat(32), "--public-key-file", file], "not found"),
    ] {
        let out = env.output(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && stderr.contains(mentions), "{args:?}: {stderr}");
    }
    assert!(env.ok(&["api-keys", "list"]).contains("paired ES256"), "a refused pairing changes nothing");

    let out = env.ok(&["api-keys", "unpair", &id]);
    assert!(out.contains("not paired"), "{out}");
    assert!(env.ok(&["api-keys", "list"]).contains("not paired"));
    let answer = call(&app.base, &token, "GET", "/v2/identities", "", None).await;
    assert_eq!(answer.status, 200, "an unpaired key needs no signature again: {answer:?}");
}

/// Two instances whose clocks disagree by 100 s share the store. Before the
/// fix (checked against f395c56) the fast one purged a `jti` whose token
/// the slow one still accepts, and the token was then accepted again.
#[tokio::test]
async fn an_instance_whose_clock_runs_fast_never_forgets_a_jti_another_still_accepts() {
    for backend in BACKENDS {
        let (db, key) = store_with_key(backend).await;
        let store = &db.store;
        let now = chrono::Utc::now().timestamp();
        // Accepted by the slow instance: kept until its exp plus the leeway.
        let keep_until = now + 40;
        assert!(record_request_token(store, &key, "jti-1", keep_until, now).await.unwrap());
        // The fast instance, 100 s ahead, purges and sees the token again.
        let fast = now + 100;
        purge_request_tokens(store, fast).await.unwrap();
        assert!(!record_request_token(store, &key, "jti-1", fast + 40, fast).await.unwrap(), "replayed");
        // Once past every instance's clock, it is purged.
        let later = now + 40 + custody_indexer::store::INSTANCE_SKEW_SECS + 1;
        if backend == Backend::Sqlite {
            assert_eq!(purge_request_tokens(store, later).await.unwrap(), 1);
        }
    }
}

/// The Python example of docs/http-api.md ("Signing in Python"), run as a
/// client copies it, with PyJWT: for an `ES256` and an `EdDSA` key, both
/// requests it signs are accepted, and the same token sent again is not.
#[tokio::test]
async fn the_docs_python_example_signs_requests_the_service_accepts() {
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/http-api.md")).unwrap();
    let after = &docs[docs.find("Signing in Python").expect("the docs' example")..];
    let start = after.find("```python\n").unwrap() + "```python\n".len();
    let example = &after[start..start + after[start..].find("```").unwrap()];
    let app = app(Backend::Sqlite).await;
    for (algorithm, make) in [
        ("ES256", "ec.generate_private_key(ec.SECP256R1())"),
        ("EdDSA", "ed25519.Ed25519PrivateKey.generate()"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        // The client's key pair, as the docs' openssl commands make it.
        let make_key = format!(
            "from cryptography.hazmat.primitives.asymmetric import ec, ed25519\n\
             from cryptography.hazmat.primitives import serialization as s\n\
             key = {make}\n\
             open('client.pem', 'wb').write(key.private_bytes(s.Encoding.PEM, s.PrivateFormat.PKCS8, s.NoEncryption()))\n\
             print(key.public_key().public_bytes(s.Encoding.PEM, s.PublicFormat.SubjectPublicKeyInfo).decode())"
        );
        let public_pem = run_python(dir.path(), make_key).await;
        let token = app.key("acme").await;
        let id = api_key::key_id(&token).unwrap().to_string();
        let public = PublicKey::from_pem(&public_pem).unwrap();
        custody_indexer::api_key::manage::pair(
            app.store(),
            &id,
            &public,
            &custody_indexer::audit::Actor::System,
        )
        .await
        .unwrap();
        // The answers it prints, as JSON.
        let as_json = "import builtins, json\n_print = builtins.print\nbuiltins.print = lambda value: _print(json.dumps(value))\n";
        let script = as_json.to_string()
            + &example
                .replace("cik_<id>_<secret>", &token)
                .replace("http://127.0.0.1:8080", &app.base)
                .replace("algorithm=\"ES256\"", &format!("algorithm=\"{algorithm}\""))
                .replace("\"r-1\"", &format!("\"r-{algorithm}\""));
        assert!(
            script.contains(&token) && script.contains(&app.base),
            "the example changed shape:\n{example}"
        );
        let out = run_python(dir.path(), script.clone()).await;
        let answers: Vec<Value> = out
            .lines()
            .map(serde_json::from_str)
            .collect::<Result<_, _>>()
            .unwrap_or_else(|e| panic!("{algorithm}: {e}: {out}"));
        assert!(answers[0]["identities"].is_array(), "{algorithm}: the signed GET: {out}");
        assert!(answers[1]["id"].is_string(), "{algorithm}: the signed POST: {out}");

        // The same token again is refused: each is accepted once.
        let replay = format!(
            "{script}\nimport requests as r\nfrom unittest import mock\n\
             sent = []\n\
             real = r.request\n\
             def keep(*a, **k):\n    sent.append(k['headers'])\n    return real(*a, **k)\n\
             with mock.patch.object(r, 'request', keep):\n    signed('GET', '/v2/identities?limit=5')\n\
             print(real('GET', '{base}/v2/identities?limit=5', headers=sent[0]).status_code)",
            base = app.base
        );
        let out = run_python(dir.path(), replay).await;
        assert_eq!(out.lines().last(), Some("401"), "{algorithm}: a token sent twice: {out}");
    }
}

/// Runs `script` with the pinned Python environment in `dir`: its output.
async fn run_python(dir: &std::path::Path, script: String) -> String {
    let dir = dir.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let out = common::python::ok(
            std::process::Command::new(common::python::python()).arg("-c").arg(&script).current_dir(&dir),
            "python",
        );
        String::from_utf8(out.stdout).unwrap()
    })
    .await
    .unwrap()
}
