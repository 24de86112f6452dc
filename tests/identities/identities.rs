//! Identities through real HTTP on SQLite and PostgreSQL: creation,
//! tenancy, pages, compliance validation, accounts of identities, the
//! sandbox provider driving onboarding (IDV, an RFI, KYB, a denial, an
//! expiry), `identity_status_update` events through the pull API, and what
//! a suspension does to transfers.

use crate::common;

use std::{sync::Arc, time::Duration};

use alloy::primitives::U256;
use common::{
    api::{App, kyc, spawn_configured},
    db::{BACKENDS, Backend},
    eventually,
};
use custody_indexer::identity::change as lifecycle;
use custody_indexer::identity::change::Change;
use custody_indexer::identity::review;
use custody_indexer::transfers::hold;
use custody_indexer::{
    amount::Amount,
    api::DEFAULT_GAS_CREDIT_USD_MICROS,
    chain::Chain,
    config::Chains,
    environment::Environment,
    identity::{
        CheckStatus, Event, State, Type,
        provider::{Options, Sandbox},
    },
    keys::{MnemonicSigner, Signer},
    store::{Created, NewIdentity, NewTransfer, Refusal, Review, Settlement, Store, now_micros},
    transfers::{Route, TransferStatus, failure},
};
use serde_json::{Value, json};

const PHRASE: &str = "test test test test test test test test test test test junk";

async fn app(backend: Backend, idv_expiry: Duration) -> App {
    app_with(backend, Options { poll: Duration::from_millis(50), idv_expiry, review_page: 100 }).await
}

async fn app_with(backend: Backend, options: Options) -> App {
    let signer: Arc<dyn Signer> = Arc::new(MnemonicSigner::from_phrase(PHRASE).unwrap());
    spawn_configured(backend, Chains::load(None).unwrap(), |state| {
        state
            .with_transfers(Some(signer), DEFAULT_GAS_CREDIT_USD_MICROS)
            .with_compliance(Environment::Sandbox, options)
    })
    .await
}

async fn identity(app: &App, key: &str, kind: &str, label: &str) -> String {
    let answer =
        app.post("/v2/identities", key, &json!({ "request_id": label, "type": kind, "label": label })).await;
    assert_eq!(answer.status, 201, "{answer:?}");
    answer.body["id"].as_str().unwrap().to_string()
}

fn kyb(business_name: &str, country: &str) -> Value {
    json!({ "kyb": {
        "business_name": business_name, "business_type": "LLC", "tax_id": "12-3456789",
        "incorporation_country": country, "source_of_funds": "BUSINESS_INCOME",
        "account_purpose": "TREASURY_MANAGEMENT",
        "addresses": [{ "street_line_1": "1 Market St", "city": "San Francisco", "region_code": "CA",
                        "postal_code": "94105", "country": "US" }]
    }})
}

/// `STATUS/SUB_STATUS` of the identity as the API shows it.
async fn state(app: &App, key: &str, id: &str) -> String {
    let body = app.get(&format!("/v2/identities/{id}"), key).await.body;
    format!("{}/{}", body["status"].as_str().unwrap(), body["sub_status"].as_str().unwrap_or(""))
}

async fn wait_for(app: &App, key: &str, id: &str, wanted: &str) {
    eventually(Duration::from_secs(30), wanted, || async {
        (state(app, key, id).await == wanted).then_some(())
    })
    .await;
}

/// The organization's identity_status_update events for `id`, each as
/// `PREVIOUS_STATUS/PREVIOUS_SUB -> STATUS/SUB`.
async fn transitions(app: &App, key: &str, id: &str) -> Vec<String> {
    let events = app.get("/v2/events?limit=100", key).await.body["events"].as_array().unwrap().clone();
    events
        .iter()
        .filter(|e| e["type"] == "identity_status_update" && e["data"]["identity"]["id"] == id)
        .map(|e| transition(&e["data"]))
        .collect()
}

/// An event's `data` as `PREVIOUS_STATUS/PREVIOUS_SUB -> STATUS/SUB`.
fn transition(d: &Value) -> String {
    format!(
        "{}/{} -> {}/{}",
        d["previous_status"].as_str().unwrap(),
        d["previous_sub_status"].as_str().unwrap(),
        d["identity"]["status"].as_str().unwrap(),
        d["identity"]["sub_status"].as_str().unwrap()
    )
}

fn says(answer: &common::api::Answer, status: u16, mentions: &str) {
    assert_eq!(answer.status, status, "{answer:?}");
    let message = answer.body["message"].as_str().unwrap_or_default();
    assert!(message.contains(mentions), "{mentions:?} not in {message:?}");
}

#[tokio::test]
async fn identities_are_created_once_per_request_id_listed_in_pages_and_scoped_to_the_organization() {
    for backend in BACKENDS {
        let app = app(backend, Duration::from_secs(3600)).await;
        let (acme, globex) = (app.key("acme").await, app.key("globex").await);
        let body = json!({ "request_id": "r-1", "type": "INDIVIDUAL", "label": "Ada" });
        let created = app.post("/v2/identities", &acme, &body).await;
        assert_eq!(created.status, 201, "{created:?}");
        let id = created.body["id"].as_str().unwrap().to_string();
        assert_eq!(created.body["status"], "PENDING_ONBOARDING");
        assert_eq!(created.body["sub_status"], "CREATED");
        assert_eq!(created.body["account_ids"], json!([]));
        assert_eq!(created.body["fiat_operations_enabled"], false);
        let again = app.post("/v2/identities", &acme, &body).await;
        assert_eq!((again.status, &again.body), (201, &created.body), "a replay answers as the creation did");
        let reused = json!({ "request_id": "r-1", "type": "INDIVIDUAL", "label": "Grace" });
        assert_eq!(app.post("/v2/identities", &acme, &reused).await.status, 409);

        assert_eq!(app.get(&format!("/v2/identities/{id}"), &acme).await.body["label"], "Ada");
        says(&app.get(&format!("/v2/identities/{id}"), &globex).await, 404, "identity");
        let other = app.post("/v2/identities", &globex, &body).await;
        assert_eq!(other.status, 201, "the same request_id in another organization is another identity");

        for n in 2..=5 {
            identity(&app, &acme, "BUSINESS", &format!("r-{n}")).await;
        }
        let mut seen = Vec::new();
        let mut path = "/v2/identities?limit=2".to_string();
        loop {
            let page = app.get(&path, &acme).await.body;
            seen.extend(page["identities"].as_array().unwrap().iter().map(|i| i["id"].clone()));
            match page["cursor"].as_str() {
                Some(cursor) => path = format!("/v2/identities?limit=2&cursor={cursor}"),
                None => break,
            }
        }
        assert_eq!(seen.len(), 5, "{backend:?}");
        for (path, mentions) in [
            ("/v2/identities?limit=0", "limit"),
            ("/v2/identities?limit=101", "limit"),
            ("/v2/identities?cursor=nope", "cursor"),
        ] {
            says(&app.get(path, &acme).await, 400, mentions);
        }
        for (body, mentions) in [
            (json!({ "request_id": "x", "identity_type": "INDIVIDUAL", "label": "A" }), "renamed type"),
            (json!({ "request_id": "x", "type": "PERSON", "label": "A" }), "type"),
            (json!({ "request_id": "x", "type": "INDIVIDUAL", "label": "" }), "label"),
            (json!({ "requestId": "x", "type": "INDIVIDUAL", "label": "A" }), "requestId"),
        ] {
            says(&app.post("/v2/identities", &acme, &body).await, 400, mentions);
        }
    }
}

#[tokio::test]
async fn compliance_data_is_validated_naming_each_field() {
    for backend in BACKENDS {
        let app = app(backend, Duration::from_secs(3600)).await;
        let (acme, globex) = (app.key("acme").await, app.key("globex").await);
        let person = identity(&app, &acme, "INDIVIDUAL", "person").await;
        let business = identity(&app, &acme, "BUSINESS", "business").await;
        let path = |id: &str| format!("/v2/identities/{id}/compliance");
        let with = |mut body: Value, field: &str, value: Value| {
            body["kyc"][field] = value;
            body
        };
        let mut both = kyc("Lovelace");
        both["kyb"] = kyb("Acme", "US")["kyb"].clone();
        let mut no_region = kyc("Lovelace");
        no_region["kyc"]["addresses"][0].as_object_mut().unwrap().remove("region_code");
        for (body, mentions) in [
            (json!({}), "kyc: required"),
            (kyb("Acme", "US"), "kyb: an INDIVIDUAL identity submits kyc"),
            (both, "kyb: an INDIVIDUAL identity submits kyc, not kyb"),
            (with(kyc("L"), "gov_id_image_front", json!("data")), "kyc.gov_id_image_front"),
            (with(kyc("L"), "kycLevel", json!(2)), "kyc.kycLevel"),
            (with(kyc("L"), "countryOfBirth", json!("GB")), "kyc.countryOfBirth: camelCase"),
            (with(kyc("L"), "nationality", json!("UK")), "kyc.nationality"),
            (with(kyc("L"), "occupation", json!("ASTRONAUT")), "kyc.occupation"),
            (with(kyc("L"), "account_purpose", json!(null)), "kyc.account_purpose"),
            (no_region, "kyc.addresses[0].region_code: required"),
        ] {
            says(&app.post(&path(&person), &acme, &body).await, 400, mentions);
        }
        let mut american = kyc("Lovelace");
        american["kyc"]["addresses"][0]["country_code"] = json!("US");
        says(&app.post(&path(&person), &acme, &american).await, 400, "kyc.additional_id_number");
        says(&app.post(&path(&business), &acme, &kyb("Acme", "DE")).await, 400, "kyb.incorporation_country");
        says(
            &app.post(&path(&business), &acme, &kyc("L")).await,
            400,
            "kyc: a BUSINESS identity submits kyb",
        );
        says(&app.post(&path(&person), &globex, &kyc("L")).await, 404, "identity");
        assert_eq!(
            transitions(&app, &acme, &person).await,
            Vec::<String>::new(),
            "refused data changes nothing"
        );

        let accepted = app.post(&path(&person), &acme, &kyc("Lovelace")).await;
        assert_eq!((accepted.status, &accepted.body), (200, &json!({})), "{backend:?}");
    }
}

#[tokio::test]
async fn accounts_belong_to_an_identity_of_the_organization_and_mirror_it() {
    for backend in BACKENDS {
        let app = app(backend, Duration::from_secs(3600)).await;
        let (acme, globex) = (app.key("acme").await, app.key("globex").await);
        let ada = identity(&app, &acme, "INDIVIDUAL", "ada").await;
        let theirs = identity(&app, &globex, "INDIVIDUAL", "theirs").await;
        let open = |identity: &str, request: &str, kind: &str| json!({ "request_id": request, "identity_id": identity, "type": kind });
        says(
            &app.post("/v2/accounts", &acme, &open("nobody", "a", "SEGREGATED")).await,
            404,
            "identity nobody",
        );
        says(&app.post("/v2/accounts", &acme, &open(&theirs, "a", "SEGREGATED")).await, 404, "identity");
        says(&app.post("/v2/accounts", &acme, &open(&ada, "a", "ONCHAIN")).await, 400, "SEGREGATED");
        says(&app.post("/v2/accounts", &acme, &open(&ada, "a", "LEDGER")).await, 400, "OMNIBUS");
        let legacy = json!({ "request_id": "a", "identity_id": ada, "account_type": "SEGREGATED" });
        says(&app.post("/v2/accounts", &acme, &legacy).await, 400, "account_type: was renamed type");

        let created = app.post("/v2/accounts", &acme, &open(&ada, "a", "SEGREGATED")).await;
        assert_eq!(created.status, 201, "{created:?}");
        let account = &created.body;
        assert_eq!(account["identity_id"], ada.as_str());
        assert_eq!(account["request_id"], "a");
        assert_eq!(account["identity_type"], "INDIVIDUAL");
        assert_eq!(account["status"], "ACTIVE");
        assert_eq!(account["identity_status"], "PENDING_ONBOARDING");
        assert_eq!(account["identity_sub_status"], "CREATED");
        assert!(!account["addresses"].as_array().unwrap().is_empty());
        let again = app.post("/v2/accounts", &acme, &open(&ada, "a", "SEGREGATED")).await;
        assert_eq!((again.status, &again.body), (201, account), "a replay answers as the creation did");
        assert_eq!(
            app.get(&format!("/v2/identities/{ada}"), &acme).await.body["account_ids"],
            json!([account["id"]])
        );

        let filtered = app.get(&format!("/v2/accounts?identity_ids={ada},{theirs}"), &acme).await.body;
        assert_eq!(filtered["accounts"].as_array().unwrap().len(), 1);
        let too_many: Vec<String> = (0..26).map(|i| format!("i{i}")).collect();
        says(&app.get(&format!("/v2/accounts?identity_ids={}", too_many.join(",")), &acme).await, 400, "25");

        let store = app.store();
        let unsent = |_| unreachable!("no transfers");
        let deny = Change {
            organization: "acme",
            identity_id: &ada,
            event: Event::Denied,
            actor: "operator:t",
            reason: None,
            decider: None,
        };
        lifecycle::change(store, &deny, &unsent).await.unwrap();
        says(&app.post("/v2/accounts", &acme, &open(&ada, "b", "SEGREGATED")).await, 400, "REJECTED");
        lifecycle::change(store, &Change { event: Event::Terminated, ..deny }, &unsent).await.unwrap();
        says(&app.post("/v2/accounts", &acme, &open(&ada, "c", "SEGREGATED")).await, 400, "TERMINATED");
    }
}

#[tokio::test]
async fn the_sandbox_takes_an_individual_through_an_rfi_and_idv_to_active() {
    for backend in BACKENDS {
        let app = app(backend, Duration::from_secs(3600)).await;
        let key = app.key("acme").await;
        let ada = identity(&app, &key, "INDIVIDUAL", "ada").await;
        let path = format!("/v2/identities/{ada}/compliance");
        assert_eq!(app.post(&path, &key, &kyc("Rfi")).await.status, 200);
        wait_for(&app, &key, &ada, "PENDING_ONBOARDING/RFI_REQUIRED").await;
        let before = transitions(&app, &key, &ada).await;
        // Data resubmitted during the RFI is accepted silently and keeps it open.
        assert_eq!(app.post(&path, &key, &kyc("Rfi")).await.status, 200);
        assert_eq!(state(&app, &key, &ada).await, "PENDING_ONBOARDING/RFI_REQUIRED");
        assert_eq!(transitions(&app, &key, &ada).await, before, "no event for a resubmission");
        // Corrected data answers the RFI; the checks then ask for IDV.
        assert_eq!(app.post(&path, &key, &kyc("Idv")).await.status, 200);
        wait_for(&app, &key, &ada, "ACTIVE/").await;
        assert_eq!(
            transitions(&app, &key, &ada).await,
            [
                "PENDING_ONBOARDING/CREATED -> PENDING_ONBOARDING/COMPLIANCE_CHECKS_IN_PROGRESS",
                "PENDING_ONBOARDING/COMPLIANCE_CHECKS_IN_PROGRESS -> PENDING_ONBOARDING/RFI_REQUIRED",
                "PENDING_ONBOARDING/RFI_REQUIRED -> PENDING_ONBOARDING/COMPLIANCE_CHECKS_IN_PROGRESS",
                "PENDING_ONBOARDING/COMPLIANCE_CHECKS_IN_PROGRESS -> PENDING_ONBOARDING/IDV_REQUIRED",
                "PENDING_ONBOARDING/IDV_REQUIRED -> PENDING_ONBOARDING/IDV_REQUESTED",
                "PENDING_ONBOARDING/IDV_REQUESTED -> PENDING_ONBOARDING/IDV_IN_PROGRESS",
                "PENDING_ONBOARDING/IDV_IN_PROGRESS -> PENDING_ONBOARDING/COMPLIANCE_CHECKS_IN_PROGRESS",
                "PENDING_ONBOARDING/COMPLIANCE_CHECKS_IN_PROGRESS -> ACTIVE/",
            ],
            "{backend:?}"
        );
        // A client finds the check: listed, newest first, and named by the
        // events of its IDV steps.
        let listed = app.get(&format!("/v2/identities/{ada}/id_verification"), &key).await;
        assert_eq!(listed.status, 200, "{listed:?}");
        let listed = listed.body["id_verification_checks"].as_array().unwrap().clone();
        assert_eq!(listed.len(), 1, "{listed:?}");
        let check_id = listed[0]["id"].as_str().unwrap().to_string();
        assert!(listed[0]["verification_url"].as_str().unwrap().starts_with("https://"));
        let events = app.get("/v2/events?limit=100", &key).await.body["events"].as_array().unwrap().clone();
        let named: Vec<(String, Value)> = events
            .iter()
            .filter(|e| e["type"] == "identity_status_update" && e["data"]["identity"]["id"] == ada.as_str())
            .map(|e| (transition(&e["data"]), e["data"]["id_verification_check_id"].clone()))
            .filter(|(t, _)| t.contains("-> PENDING_ONBOARDING/IDV_"))
            .collect();
        let check_value = json!(check_id);
        assert_eq!(
            named.iter().map(|(t, id)| (t.rsplit(' ').next().unwrap(), id)).collect::<Vec<_>>(),
            [
                ("PENDING_ONBOARDING/IDV_REQUIRED", &Value::Null),
                ("PENDING_ONBOARDING/IDV_REQUESTED", &check_value),
                ("PENDING_ONBOARDING/IDV_IN_PROGRESS", &check_value),
            ],
            "{backend:?}"
        );
        let others = events.iter().filter(|e| {
            e["type"] == "identity_status_update"
                && !e["data"]["identity"]["sub_status"].as_str().unwrap().starts_with("IDV_")
        });
        assert!(others.clone().all(|e| e["data"].get("id_verification_check_id").is_none()));
        let page = app.get(&format!("/v2/identities/{ada}/id_verification?limit=0"), &key).await;
        assert_eq!(page.status, 400, "{page:?}");
        let globex = app.key("globex").await;
        let elsewhere = app.get(&format!("/v2/identities/{ada}/id_verification"), &globex).await;
        assert_eq!(elsewhere.status, 404, "another organization's identity is not found");
        let checks = app.store().idv_checks("acme", &ada).await.unwrap();
        assert_eq!(checks[0].id, check_id);
        let check = app.get(&format!("/v2/identities/{ada}/id_verification/{}", checks[0].id), &key).await;
        assert_eq!(check.status, 200, "{check:?}");
        let check = &check.body["id_verification_check"];
        assert_eq!(
            (check["status"].as_str(), check["reason"].as_str()),
            (Some("COMPLETED"), Some("ONBOARDING"))
        );
        assert_eq!(check["identity_id"], ada.as_str());
        assert!(check["verification_url"].as_str().unwrap().starts_with("https://"));
        assert_eq!(
            app.get(&format!("/v2/identities/{ada}/id_verification/{}", checks[0].id), &globex).await.status,
            404
        );
    }
}

#[tokio::test]
async fn the_sandbox_approves_a_business_denies_on_its_magic_value_and_expires_idv_checks() {
    for backend in BACKENDS {
        let app = app(backend, Duration::from_millis(300)).await;
        let key = app.key("acme").await;
        let (acme, denied, late) = (
            identity(&app, &key, "BUSINESS", "acme-inc").await,
            identity(&app, &key, "INDIVIDUAL", "denied").await,
            identity(&app, &key, "INDIVIDUAL", "late").await,
        );
        let submit = |id: &str, body: Value| {
            let path = format!("/v2/identities/{id}/compliance");
            let app = &app;
            let key = &key;
            async move { assert_eq!(app.post(&path, key, &body).await.status, 200) }
        };
        submit(&acme, kyb("Acme Inc", "US")).await;
        submit(&denied, kyc("Deny")).await;
        submit(&late, kyc("IdvExpire")).await;
        wait_for(&app, &key, &acme, "ACTIVE/").await;
        wait_for(&app, &key, &denied, "REJECTED/").await;
        wait_for(&app, &key, &late, "PENDING_ONBOARDING/IDV_EXPIRED").await;
        let events = app.get("/v2/events?limit=100", &key).await.body["events"].as_array().unwrap().clone();
        let rejection = events.iter().find(|e| e["data"]["identity"]["status"] == "REJECTED").unwrap();
        assert_eq!(rejection["data"]["identity"]["identity_type"], "INDIVIDUAL");
        assert!(rejection["data"]["status_reason"].as_str().unwrap().contains("denied"), "{rejection}");
        let checks = app.store().idv_checks("acme", &late).await.unwrap();
        let check = app.get(&format!("/v2/identities/{late}/id_verification/{}", checks[0].id), &key).await;
        assert_eq!(check.body["id_verification_check"]["status"], "EXPIRED", "{backend:?}");
        // A new submission starts over and asks for a new check.
        submit(&late, kyc("Idv")).await;
        wait_for(&app, &key, &late, "ACTIVE/").await;
        // The provider's decisions and the service's expiry are audited.
        let log = app.store().audit_entries(0, Some("acme"), 1000).await.unwrap();
        let of = |id: &str| -> Vec<(String, String)> {
            log.iter().filter(|e| e.target_id == id).map(|e| (e.actor.clone(), e.action.clone())).collect()
        };
        assert!(
            of(&acme).contains(&("provider:sandbox".into(), "identity.approved".into())),
            "{:?}",
            of(&acme)
        );
        assert!(
            of(&denied).contains(&("provider:sandbox".into(), "identity.denied".into())),
            "{:?}",
            of(&denied)
        );
        assert!(of(&late).contains(&("system".into(), "identity.idv_expired".into())), "{:?}", of(&late));
    }
}

#[tokio::test]
async fn identities_left_waiting_on_their_client_do_not_keep_a_newer_one_from_review() {
    for backend in BACKENDS {
        let options = Options {
            poll: Duration::from_millis(50),
            idv_expiry: Duration::from_secs(3600),
            review_page: 2,
        };
        let app = app_with(backend, options).await;
        let (acme, globex) = (app.key("acme").await, app.key("globex").await);
        // More than a page of identities whose RFI nobody answers: the
        // provider only waits on them, so they never change.
        let mut waiting = Vec::new();
        for n in 0..5 {
            let id = identity(&app, &acme, "INDIVIDUAL", &format!("waits-{n}")).await;
            assert_eq!(
                app.post(&format!("/v2/identities/{id}/compliance"), &acme, &kyc("Rfi")).await.status,
                200
            );
            waiting.push(id);
        }
        for id in &waiting {
            wait_for(&app, &acme, id, "PENDING_ONBOARDING/RFI_REQUIRED").await;
        }
        let newer = identity(&app, &globex, "INDIVIDUAL", "newer").await;
        assert_eq!(
            app.post(&format!("/v2/identities/{newer}/compliance"), &globex, &kyc("Lovelace")).await.status,
            200
        );
        wait_for(&app, &globex, &newer, "ACTIVE/").await;
    }
}

/// An individual of `acme` in a store of its own, with `data` submitted.
async fn submitted(store: &Store, data: &Value) -> String {
    custody_indexer::operators::tenants::create_bare_organization(store, "acme", None).await.unwrap();
    let id = uuid::Uuid::new_v4().to_string();
    let new = NewIdentity {
        organization: "acme".into(),
        id: id.clone(),
        request_id: None,
        kind: Type::Individual,
        label: "Ada".into(),
        state: State::CREATED,
        actor: "client".into(),
    };
    custody_indexer::identity::register::create_identity(store, &new).await.unwrap();
    lifecycle::submit(store, "acme", &id, data).await.unwrap();
    id
}

/// The review of `id` the provider would take now.
async fn review_of(store: &Store, id: &str) -> Review {
    store.reviews(None, i64::MAX, 100).await.unwrap().into_iter().find(|r| r.identity_id == id).unwrap()
}

/// Applies `sandbox`'s next decision on `id`; its event.
async fn step(store: &Store, sandbox: &Sandbox, id: &str) -> Event {
    let review = review_of(store, id).await;
    let decision = sandbox.decide(&review).unwrap();
    assert!(review::decide(store, &review, &decision.decided("provider:sandbox")).await.unwrap());
    decision.event
}

/// `STATUS/SUB_STATUS` of the stored identity.
async fn stored_state(store: &Store, id: &str) -> String {
    let body = serde_json::to_value(store.identity("acme", id).await.unwrap()).unwrap();
    format!("{}/{}", body["status"].as_str().unwrap(), body["sub_status"].as_str().unwrap_or(""))
}

#[tokio::test]
async fn a_check_left_open_by_earlier_data_expires_without_moving_the_identity_off_its_current_check() {
    for backend in BACKENDS {
        let db = common::db::TestDb::new(backend).await;
        let store = &db.store;
        let (at_once, in_an_hour) = (Sandbox::new(Duration::ZERO), Sandbox::new(Duration::from_secs(3600)));
        let id = submitted(store, &kyc("Idv")).await;
        assert_eq!(step(store, &at_once, &id).await, Event::IdvRequired);
        assert_eq!(step(store, &at_once, &id).await, Event::IdvRequested);
        // New data while the first check is still open: the checks start over.
        lifecycle::submit(store, "acme", &id, &kyc("Idv")).await.unwrap();
        assert_eq!(step(store, &in_an_hour, &id).await, Event::IdvRequired);
        assert_eq!(step(store, &in_an_hour, &id).await, Event::IdvRequested);

        assert_eq!(review::expire_checks(store, now_micros()).await.unwrap(), vec![id.clone()]);
        assert_eq!(stored_state(store, &id).await, "PENDING_ONBOARDING/IDV_REQUESTED", "{backend:?}");
        let statuses: Vec<_> =
            store.idv_checks("acme", &id).await.unwrap().iter().map(|c| c.status).collect();
        assert_eq!(statuses, [CheckStatus::NotStarted, CheckStatus::Expired]);
        let actions = store.identity_actions("acme", &id).await.unwrap();
        assert!(actions.iter().all(|a| a.event != "IdvExpired"), "{actions:?}");

        // The current check expiring still moves it.
        review::expire_checks(store, i64::MAX).await.unwrap();
        assert_eq!(stored_state(store, &id).await, "PENDING_ONBOARDING/IDV_EXPIRED");
    }
}

#[tokio::test]
async fn a_decision_taken_on_data_resubmitted_meanwhile_is_dropped_and_taken_again_on_the_new_data() {
    for backend in BACKENDS {
        let db = common::db::TestDb::new(backend).await;
        let store = &db.store;
        let sandbox = Sandbox::new(Duration::from_secs(3600));
        let id = submitted(store, &kyc("Lovelace")).await;
        let review = review_of(store, &id).await;
        let decision = sandbox.decide(&review).unwrap();
        assert_eq!(decision.event, Event::Approved);
        lifecycle::submit(store, "acme", &id, &kyc("Deny")).await.unwrap();
        let applied = review::decide(store, &review, &decision.decided("provider:sandbox")).await;
        assert!(!applied.unwrap(), "approved on data the client replaced ({backend:?})");
        assert_eq!(stored_state(store, &id).await, "PENDING_ONBOARDING/COMPLIANCE_CHECKS_IN_PROGRESS");
        assert_eq!(step(store, &sandbox, &id).await, Event::Denied);
        assert_eq!(stored_state(store, &id).await, "REJECTED/");
    }
}

/// An `ACCEPTED` transfer of `account`, held against a balance of 1000.
fn transfer(account: &str) -> NewTransfer {
    NewTransfer {
        organization: "acme".into(),
        request_id: uuid::Uuid::new_v4().to_string(),
        account_id: account.into(),
        chain: Chain::BaseSepolia,
        source_address: "0x1111111111111111111111111111111111111111".into(),
        destination_address: "0x2222222222222222222222222222222222222222".into(),
        currency_symbol: "USDC".into(),
        amount: Amount::from_raw(U256::from(10u64), 6),
        route: Route::Authorization,
        key_index: Some(2),
    }
}

fn not_active(_: Chain) -> Settlement {
    Settlement {
        status: TransferStatus::Failed,
        transaction_hash: None,
        failure: Some(failure("ACCOUNT_NOT_ACTIVE", "suspended")),
        fees: Vec::new(),
        native_symbol: "ETH".into(),
        native_decimals: 18,
        usd_micros_per_coin: 0,
    }
}

#[tokio::test]
async fn only_an_active_identity_sends_and_a_suspension_fails_its_unsent_transfers() {
    for backend in BACKENDS {
        let app = app(backend, Duration::from_secs(3600)).await;
        let key = app.key("acme").await;
        let ada = identity(&app, &key, "INDIVIDUAL", "ada").await;
        let opened = app
            .post(
                "/v2/accounts",
                &key,
                &json!({ "request_id": "a", "identity_id": ada, "type": "SEGREGATED" }),
            )
            .await;
        let account = opened.body["id"].as_str().unwrap().to_string();
        let store = app.store();
        let balance = U256::from(1_000u64);
        let refused = hold::create(store, &transfer(&account), balance).await.unwrap_err();
        assert!(
            matches!(refused, Refusal::IdentityNotActive(..)),
            "a pending identity cannot send: {refused:?}"
        );

        assert_eq!(
            app.post(&format!("/v2/identities/{ada}/compliance"), &key, &kyc("Lovelace")).await.status,
            200
        );
        wait_for(&app, &key, &ada, "ACTIVE/").await;
        let Ok(Created::New(accepted)) = hold::create(store, &transfer(&account), balance).await else {
            panic!("an active identity's account sends");
        };
        let change = |event, reason| Change {
            organization: "acme",
            identity_id: &ada,
            event,
            actor: "operator:alice",
            reason: Some(reason),
            decider: None,
        };
        lifecycle::change(store, &change(Event::Suspended, "fraud review"), &not_active).await.unwrap();
        let failed = store.transfer(&accepted.id).await.unwrap();
        assert_eq!(failed.status, TransferStatus::Failed, "{backend:?}");
        assert_eq!(failed.failure_details.unwrap().code, "ACCOUNT_NOT_ACTIVE");
        assert!(
            store.held_amounts(&account).await.unwrap().values().all(|held| held.is_zero()),
            "hold released"
        );
        let account_now = app.get(&format!("/v2/accounts/{account}"), &key).await.body;
        assert_eq!(
            (&account_now["status"], &account_now["identity_status"]),
            (&json!("FROZEN"), &json!("SUSPENDED"))
        );
        let refused = hold::create(store, &transfer(&account), balance).await.unwrap_err();
        assert!(matches!(refused, Refusal::NotActive(..)), "a frozen account cannot send: {refused:?}");

        let events = app.get("/v2/events?limit=100", &key).await.body["events"].as_array().unwrap().clone();
        let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert!(types.contains(&"crypto_transfer_failed"), "{types:?}");
        let suspension = events.iter().rfind(|e| e["type"] == "identity_status_update").unwrap();
        assert_eq!(suspension["data"]["previous_status"], "ACTIVE");
        assert_eq!(suspension["data"]["identity"]["status"], "SUSPENDED");
        assert_eq!(suspension["data"]["affected_account_ids"], json!([account]));
        assert_eq!(suspension["data"]["status_reason"], "fraud review");

        // Rule 4: reinstating with an RFI keeps the identity transacting (rule 5).
        lifecycle::change(store, &change(Event::RfiRaised, "documents"), &not_active).await.unwrap();
        lifecycle::change(store, &change(Event::ReinstatedWithRfi, "cleared"), &not_active).await.unwrap();
        assert_eq!(state(&app, &key, &ada).await, "ACTIVE/RFI_REQUIRED");
        assert!(matches!(hold::create(store, &transfer(&account), balance).await, Ok(Created::New(_))));
        lifecycle::change(store, &change(Event::Terminated, "closed"), &not_active).await.unwrap();
        assert_eq!(app.get(&format!("/v2/accounts/{account}"), &key).await.body["status"], "CLOSED");
        let again =
            lifecycle::change(store, &change(Event::Reinstated, "no"), &not_active).await.unwrap_err();
        assert!(again.to_string().contains("terminated"), "{again}");
        assert_eq!(
            transitions(&app, &key, &ada).await[2..],
            [
                "ACTIVE/ -> SUSPENDED/",
                "SUSPENDED/ -> SUSPENDED/RFI_REQUIRED",
                "SUSPENDED/RFI_REQUIRED -> ACTIVE/RFI_REQUIRED",
                "ACTIVE/RFI_REQUIRED -> TERMINATED/",
            ]
        );
    }
}

#[tokio::test]
async fn operator_commands_record_who_and_why_and_refuse_what_the_lifecycle_refuses() {
    let env =
        common::cli::Env::with_chain_file(&common::chain_toml(&["http://127.0.0.1:1".into()], None, ""));
    env.identity_in("default", "ada", "PENDING_ONBOARDING");
    let act = |args: &[&str]| {
        let mut all = vec!["identities"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--by", "grace", "--reason", "policy 7"]);
        env.output(&all)
    };
    let refused = act(&["approve", "ada"]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("no compliance data was submitted"));
    for args in
        [&["rfi", "raise", "ada"][..], &["rfi", "fulfil", "ada"], &["reject", "ada"], &["terminate", "ada"]]
    {
        let out = act(args);
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let shown: Value = serde_json::from_str(&env.ok(&["identities", "show", "ada", "--json"])).unwrap();
    assert_eq!(shown["identity"]["status"], "TERMINATED");
    let actions: Vec<(String, String, String)> = shown["actions"]
        .as_array()
        .unwrap()
        .iter()
        .skip(1)
        .map(|a| {
            (
                a["event"].as_str().unwrap().into(),
                a["actor"].as_str().unwrap().into(),
                a["status"].as_str().unwrap().into(),
            )
        })
        .collect();
    // On the store directly: the operating-system user, the --by beside it.
    assert!(actions.iter().all(|(_, actor, _)| actor.starts_with("local:") && actor.ends_with(" (grace)")));
    let by = actions[0].1.clone();
    assert_eq!(
        actions,
        [
            ("RfiRaised".into(), by.clone(), "PENDING_ONBOARDING".into()),
            ("RfiFulfilled".into(), by.clone(), "PENDING_ONBOARDING".into()),
            ("Denied".into(), by.clone(), "REJECTED".into()),
            ("Terminated".into(), by, "TERMINATED".into()),
        ]
    );
    assert!(shown["actions"].as_array().unwrap().iter().skip(1).all(|a| a["reason"] == "policy 7"));
    let events = env.store().await.events_after("default", None, 100).await.unwrap();
    assert_eq!(events.len(), 4, "one event per change");
    // Each decision is also in the audit log, by the local operator.
    let log = env.ok(&["audit", "list", "--json"]);
    let entries: Vec<Value> = log.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let decided: Vec<_> = entries
        .iter()
        .filter(|e| e["target_kind"] == "identity")
        .map(|e| (e["action"].as_str().unwrap(), e["actor_name"].as_str(), e["reason"].as_str()))
        .collect();
    let grace = (Some("grace"), Some("policy 7"));
    assert_eq!(
        decided,
        [
            ("identity.imported", Some("test"), Some("test setup")),
            ("identity.rfi_raised", grace.0, grace.1),
            ("identity.rfi_fulfilled", grace.0, grace.1),
            ("identity.denied", grace.0, grace.1),
            ("identity.terminated", grace.0, grace.1),
        ]
    );
    assert!(entries.iter().all(|e| e["actor"].as_str().unwrap().starts_with("local:")), "{log}");
}

#[tokio::test]
async fn an_operator_suspension_fails_the_accounts_accepted_transfers_not_yet_sent() {
    let env =
        common::cli::Env::with_chain_file(&common::chain_toml(&["http://127.0.0.1:1".into()], None, ""));
    env.ok(&["organizations", "create", "--id", "acme"]);
    env.identity_in("acme", "bob", "ACTIVE");
    let address = "0x1111111111111111111111111111111111111111";
    let chain = common::CHAIN.as_str();
    let add = ["accounts", "add", "--organization", "acme", "--account-id", "bob-1", "--identity-id", "bob"];
    env.ok(&[&add[..], &["--type", "SEGREGATED", "--address", address, "--chains", chain]].concat());
    let store = env.store().await;
    let new = NewTransfer { chain: common::CHAIN, ..transfer("bob-1") };
    let Ok(Created::New(accepted)) = hold::create(&store, &new, U256::from(1_000u64)).await else {
        panic!("an active identity's account sends");
    };
    let suspend = ["identities", "suspend", "bob", "--organization", "acme"];
    env.ok(&[&suspend[..], &["--by", "grace", "--reason", "fraud review"]].concat());
    let failed = store.transfer(&accepted.id).await.unwrap();
    assert_eq!(failed.status, TransferStatus::Failed);
    assert_eq!(failed.failure_details.unwrap().code, "ACCOUNT_NOT_ACTIVE");
    assert!(store.held_amounts("bob-1").await.unwrap().values().all(|held| held.is_zero()), "hold released");
}

#[tokio::test]
async fn identity_events_reach_a_webhook_signed_and_in_order_through_retries() {
    use custody_indexer::events::{
        delivery::{self, DeliveryConfig},
        signing::Secret,
        url::Policy,
    };
    let app = app(Backend::Postgres, Duration::from_secs(3600)).await;
    let key = app.key("acme").await;
    let receiver = common::receiver::Receiver::start().await;
    let secret = Secret::generate();
    common::webhook(app.store(), "acme", (&receiver.url, "hook"), secret.expose()).await;
    receiver.fail_next(3, 503);
    let config = DeliveryConfig {
        schedule: vec![Duration::from_millis(100); 10],
        poll: Duration::from_millis(50),
        policy: Policy::PRIVATE,
        ..DeliveryConfig::default()
    };
    let shutdown = tokio_util::sync::CancellationToken::new();
    tokio::spawn(delivery::run(app.store().clone(), config, shutdown.clone()));
    let ada = identity(&app, &key, "INDIVIDUAL", "ada").await;
    assert_eq!(app.post(&format!("/v2/identities/{ada}/compliance"), &key, &kyc("Idv")).await.status, 200);
    wait_for(&app, &key, &ada, "ACTIVE/").await;
    let pulled = transitions(&app, &key, &ada).await;
    assert_eq!(pulled.len(), 6, "{pulled:?}");
    let delivered = eventually(Duration::from_secs(30), "every event delivered", || async {
        let delivered = receiver.delivered();
        (delivered.len() == pulled.len()).then_some(delivered)
    })
    .await;
    shutdown.cancel();
    assert!(delivered.iter().all(|d| d.signed_by(secret.expose())), "signed");
    let pushed: Vec<String> = delivered.iter().map(|d| transition(&d.json()["data"])).collect();
    assert_eq!(pushed, pulled, "in order per identity, as the pull API has them");
}

/// Before the fix (checked against f395c56) any length and any number of
/// submissions were accepted and stored.
#[tokio::test]
async fn compliance_submissions_are_bounded_in_size_and_twenty_a_day_per_identity() {
    for backend in BACKENDS {
        // Production: no provider decides, so every submission is taken.
        let options = Options {
            poll: Duration::from_millis(50),
            idv_expiry: Duration::from_secs(3600),
            review_page: 100,
        };
        let app = spawn_configured(backend, Chains::load(None).unwrap(), |state| {
            state.with_compliance(Environment::Production, options)
        })
        .await;
        let acme = app.key("acme").await;
        let (person, other) =
            (identity(&app, &acme, "INDIVIDUAL", "p").await, identity(&app, &acme, "INDIVIDUAL", "o").await);
        let path = |id: &str| format!("/v2/identities/{id}/compliance");
        let mut long = kyc("Lovelace");
        long["kyc"]["last_name"] = json!("x".repeat(101));
        says(&app.post(&path(&person), &acme, &long).await, 400, "kyc.last_name: at most 100 characters");
        long["kyc"]["addresses"][0]["line1"] = json!("x".repeat(10_000));
        says(
            &app.post(&path(&person), &acme, &long).await,
            400,
            "kyc.addresses[0].line1: at most 200 characters",
        );
        for i in 0..20 {
            let accepted = app.post(&path(&person), &acme, &kyc(&format!("Lovelace{i}"))).await;
            assert_eq!(accepted.status, 200, "{backend:?} #{i}: {accepted:?}");
        }
        let refused = app.post(&path(&person), &acme, &kyc("Lovelace")).await;
        says(&refused, 429, "20 compliance submissions");
        assert_eq!(refused.body["code"], "RATE_LIMITED");
        let retry: u64 = refused.headers["retry-after"].to_str().unwrap().parse().unwrap();
        assert!((1..=86_400).contains(&retry), "until midnight UTC: {retry}");
        // A body refused for its content is still a 400, and another identity is unaffected.
        says(&app.post(&path(&person), &acme, &long).await, 400, "at most");
        assert_eq!(app.post(&path(&other), &acme, &kyc("Other")).await.status, 200);
        let actions = app.store().identity_actions("acme", &person).await.unwrap();
        let submitted = actions.iter().filter(|a| a.event == "ComplianceSubmitted").count();
        assert_eq!(submitted, 20, "{backend:?}: refused bodies are not recorded");
    }
}
