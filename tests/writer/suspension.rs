//! Two admins hold the platform: one admin alone (or whoever holds that
//! admin's key) cannot take the other away for good. Disabling or
//! demoting the other suspends it at once (its key stops, it decides
//! nothing) and raises an alarm; the proposer completes it only on the
//! store, with the pepper and its own key (`--break-glass`, checkpointed
//! at once), or another admin approves it; undecided, it lapses. A writer
//! who lifts the suspension's row gives nothing back: the log holds it.
//! Taking a money role's last holder away is answered with a warning.

use crate::{common, keyed};

use alloy::transports::http::reqwest::Method;
use common::{
    api::send_json,
    cli::Env,
    db::BACKENDS,
    governance,
    writer::{Forged, append_forged},
};
use custody_indexer::{
    audit::Detail,
    operators::{changes, suspension},
    store::{Store, now_micros},
};
use serde_json::{Value, json};

async fn call(base: &str, method: Method, path: &str, key: &str, body: Value) -> (u16, Value) {
    let answer = send_json(method, &format!("{base}{path}"), Some(key), Some(&body)).await;
    (answer.status, answer.body)
}

/// Whether `operator` is under the suspension alarm.
async fn alarmed(store: &Store, operator: &str) -> bool {
    let conditions = store.conditions().await.unwrap();
    conditions.iter().any(|c| c.kind == suspension::CONDITION && c.subject == operator)
}

/// Runs the command line on `app`'s store with the tests' pepper and the
/// operator key `key`: its exit status and its output.
fn cli(env: &Env, args: &[&str], key: &str) -> (bool, String) {
    let out = env.command(args).env("CUSTODY_INDEXER_OPERATOR_KEY", key).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

fn cli_env(app: &common::api::App) -> Env {
    let mut env = Env::with_chain_file("");
    env.database_url = app.db.url.clone();
    env
}

// Multi-threaded: the command line writes the store this process's
// service holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_admin_of_two_suspends_the_other_and_completes_it_only_by_breaking_glass() {
    keyed();
    for backend in BACKENDS {
        let (app, admins) = super::grants::past_genesis(backend).await;
        let (base, store) = (app.base.as_str(), app.store());
        let (tom, tom_key) = governance::operator(base, store, &admins, "Tom", "treasury").await;
        let ((ada, ada_key), (bea, bea_key)) = (admins.first.clone(), admins.second.clone());
        let ops = "/operator/v1/operators";

        // Suspended at once, not disabled: the change waits.
        let path = format!("{ops}/{bea}/disable");
        let (status, answer) =
            call(base, Method::POST, &path, &ada_key, json!({ "reason": "phished" })).await;
        assert_eq!(status, 202, "{backend:?}: {answer}");
        let change = answer["change"]["id"].as_str().unwrap().to_string();
        assert_eq!(
            (answer["change"]["kind"].as_str(), answer["change"]["status"].as_str()),
            (Some("operator.disable"), Some("PENDING"))
        );
        let until =
            chrono::DateTime::parse_from_rfc3339(answer["suspended_until"].as_str().unwrap()).unwrap();
        let week = chrono::Utc::now() + chrono::Duration::days(7);
        assert!(
            (until.timestamp() - week.timestamp()).abs() < 60,
            "{backend:?}: lapses in seven days: {until}"
        );
        let bea_row = store.operator(&bea).await.unwrap().unwrap();
        assert!(bea_row.is_enabled(), "{backend:?}: suspended, not disabled");
        assert!(alarmed(store, &bea).await, "{backend:?}: the alarm is raised");

        // Bea's key stops, naming the suspension; she decides nothing.
        let (status, refused) = call(base, Method::GET, ops, &bea_key, json!({})).await;
        assert_eq!(status, 401, "{backend:?}: {refused}");
        assert!(refused["message"].as_str().unwrap().contains("suspended"), "{refused}");
        // Ada alone cannot take her away twice, nor grant anything.
        let (status, _) = call(base, Method::POST, &path, &ada_key, json!({ "reason": "again" })).await;
        assert_eq!(status, 409, "{backend:?}: suspended already");
        let eve = json!({ "name": "Eve", "email": "eve@example.com", "roles": ["admin"] });
        let (status, proposed) = call(base, Method::POST, ops, &ada_key, eve).await;
        assert_eq!(status, 202, "{backend:?}: a grant still waits: {proposed}");
        let approve = format!("/operator/v1/changes/{}/approve", proposed["change"]["id"].as_str().unwrap());
        assert_eq!(call(base, Method::POST, &approve, &bea_key, json!({})).await.0, 401, "{backend:?}");

        // A writer who ends the suspension's row gives nothing back.
        let pool = sqlx::AnyPool::connect(&app.db.url).await.unwrap();
        let set = |status: &'static str| {
            sqlx::query("UPDATE operator_changes SET status = $1 WHERE id = $2")
                .bind(status)
                .bind(change.clone())
        };
        set("REFUSED").execute(&pool).await.unwrap();
        let (status, _) = call(base, Method::GET, ops, &bea_key, json!({})).await;
        assert_eq!(status, 401, "{backend:?}: the log holds the suspension");
        // Nor does an entry of its own that would end it sooner.
        let sooner =
            Detail { change_id: Some("chg_writer".into()), expires_at: Some(1), ..Detail::default() };
        let forged = Forged {
            actor: "system",
            action: "operator.suspended",
            target_kind: "operator",
            target_id: &bea,
            organization_id: None,
            detail: Some(sooner),
        };
        append_forged(&pool, store, forged).await;
        let (status, _) = call(base, Method::GET, ops, &bea_key, json!({})).await;
        assert_eq!(status, 401, "{backend:?}: a writer's entry only takes more away");
        set("PENDING").execute(&pool).await.unwrap();

        // Completed on the store only, by its proposer, with its own key.
        let env = cli_env(&app);
        let glass = ["operators", "disable", bea.as_str(), "--reason", "confirmed phished", "--break-glass"];
        let (ok, said) = cli(&env, &glass, &tom_key);
        assert!(!ok && said.contains("`admin`"), "{backend:?}: a treasury key: {said}");
        let (ok, said) = cli(&env, &[&glass[..], &["--server", base]].concat(), &ada_key);
        assert!(!ok && said.contains("drop --server"), "{backend:?}: {said}");
        sqlx::query("UPDATE audit_checkpoint_due SET due_at = $1 WHERE id = 1")
            .bind(now_micros() + 3_600_000_000)
            .execute(&pool)
            .await
            .unwrap();
        let (ok, said) = cli(&env, &glass, &ada_key);
        assert!(ok, "{backend:?}: {said}");
        assert!(said.contains(&format!("operator {bea} disabled")), "{said}");
        assert!(!store.operator(&bea).await.unwrap().unwrap().is_enabled(), "{backend:?}");
        assert!(!alarmed(store, &bea).await, "{backend:?}: the alarm ends with it");
        let (ok, said) = cli(&env, &glass, &ada_key);
        assert!(!ok && said.contains("no suspension of operator"), "{backend:?}: completed once: {said}");

        // Recorded as breaking glass, and checkpointed at once.
        let log = store.audit_entries(0, None, 1000).await.unwrap();
        let completed = log.iter().find(|e| e.action == "operator_change.completed").unwrap();
        assert_eq!(
            (completed.actor.as_str(), completed.target_id.as_str()),
            (format!("break-glass:{ada}").as_str(), change.as_str())
        );
        let disabled = log.iter().rfind(|e| e.action == "operator.disabled" && e.target_id == bea).unwrap();
        assert!(disabled.detail.as_deref().unwrap().contains(&change), "{backend:?}: {:?}", disabled.detail);
        assert!(log.iter().any(|e| e.action == "operator.suspended" && e.target_id == bea));
        let due: i64 = sqlx::query_scalar("SELECT due_at FROM audit_checkpoint_due WHERE id = 1")
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(due, 0, "{backend:?}: a checkpoint is due at once");

        // Tom held the treasury role alone: disabled with a warning.
        let path = format!("{ops}/{tom}/disable");
        let (status, answer) = call(base, Method::POST, &path, &ada_key, json!({ "reason": "left" })).await;
        assert_eq!(status, 200, "{backend:?}: {answer}");
        let warnings = answer["warnings"].as_array().unwrap();
        assert!(
            warnings[0].as_str().unwrap().contains("last enabled holder of the `treasury` role"),
            "{answer}"
        );
        let _ = ada;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_admin_approves_a_suspension_and_one_undecided_lapses() {
    keyed();
    for backend in BACKENDS {
        let (app, admins) = super::grants::past_genesis(backend).await;
        let (base, store) = (app.base.as_str(), app.store());
        let ((_, ada_key), (bea, bea_key)) = (admins.first.clone(), admins.second.clone());
        let ops = "/operator/v1/operators";

        // Cid, an admin approved but not yet enrolled, is not counted.
        let cid = json!({ "name": "Cid", "email": "cid@example.com", "roles": ["admin", "compliance"] });
        let (_, proposed) = call(base, Method::POST, ops, &ada_key, cid).await;
        let approve = format!("/operator/v1/changes/{}/approve", proposed["change"]["id"].as_str().unwrap());
        let (status, approved) = call(base, Method::POST, &approve, &bea_key, json!({})).await;
        assert_eq!(status, 200, "{backend:?}: {approved}");
        let cid = approved["created"]["operator"]["id"].as_str().unwrap().to_string();
        let path = format!("{ops}/{bea}/disable");
        let (status, answer) = call(base, Method::POST, &path, &ada_key, json!({ "reason": "left" })).await;
        assert_eq!(status, 202, "{backend:?}: {answer}");
        let change = answer["change"]["id"].as_str().unwrap().to_string();

        // Enrolled, Cid is another admin than the proposer and the target.
        let cid_key = governance::enrol(base, store, &cid).await.expect("Cid's first key");
        let approve = format!("/operator/v1/changes/{change}/approve");
        let (status, approved) = call(base, Method::POST, &approve, &cid_key, json!({})).await;
        assert_eq!(status, 200, "{backend:?}: {approved}");
        assert_eq!(approved["change"]["status"], "APPLIED");
        assert!(!store.operator(&bea).await.unwrap().unwrap().is_enabled(), "{backend:?}");
        assert!(!alarmed(store, &bea).await, "{backend:?}");

        // Two admins again, Ada and Cid: Cid's `admin` role removed is a
        // suspension too (a demotion), completed only with the roles it leaves.
        let path = format!("{ops}/{cid}/roles");
        let body = json!({ "roles": ["compliance"], "reason": "moves to compliance" });
        let (status, answer) = call(base, Method::PUT, &path, &ada_key, body).await;
        assert_eq!(status, 202, "{backend:?}: {answer}");
        assert_eq!(answer["change"]["kind"], "operator.demote");
        assert_eq!(call(base, Method::GET, ops, &cid_key, json!({})).await.0, 401, "{backend:?}");
        let env = cli_env(&app);
        let glass = [
            "operators",
            "roles",
            "set",
            cid.as_str(),
            "--role",
            "treasury",
            "--reason",
            "r",
            "--break-glass",
        ];
        let (ok, said) = cli(&env, &glass, &ada_key);
        assert!(!ok && said.contains("--role compliance"), "{backend:?}: {said}");

        // Undecided for seven days, it lapses: expired, recorded, alarm over.
        let later = now_micros() + suspension::LAPSES_AFTER.as_micros() as i64 + 1;
        assert_eq!(changes::sweep(store, later).await.unwrap(), 0, "{backend:?}: none in force");
        let changes = store.operator_changes(false, 100).await.unwrap();
        let demotion = changes.iter().find(|c| c.target == cid && c.kind.suspends()).unwrap();
        assert_eq!(demotion.status.as_str(), "EXPIRED", "{backend:?}");
        let log = store.audit_entries(0, None, 1000).await.unwrap();
        let lapsed = log.iter().find(|e| e.action == "operator.suspension_lapsed").unwrap();
        assert_eq!(lapsed.target_id, cid, "{backend:?}");
        assert!(!alarmed(store, &cid).await, "{backend:?}: the alarm ends with it");
        let roles = &store.operator(&cid).await.unwrap().unwrap().roles;
        assert_eq!(roles.len(), 2, "{backend:?}: Cid keeps both roles: {roles:?}");
        // Ada cannot suspend Cid again at once, and again, and again.
        let body = json!({ "roles": ["compliance"], "reason": "once more" });
        let (status, again) = call(base, Method::PUT, &path, &ada_key, body).await;
        assert_eq!(status, 409, "{backend:?}: {again}");
        assert!(again["message"].as_str().unwrap().contains("not suspended again before"), "{again}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspension_whose_proposers_key_is_revoked_ends_and_its_target_acts_again() {
    keyed();
    for backend in BACKENDS {
        let (app, admins) = super::grants::past_genesis(backend).await;
        let (base, store) = (app.base.as_str(), app.store());
        let ((ada, ada_key), (bea, bea_key)) = (admins.first.clone(), admins.second.clone());
        let ops = "/operator/v1/operators";
        let path = format!("{ops}/{bea}/disable");
        let (status, _) =
            call(base, Method::POST, &path, &ada_key, json!({ "reason": "a stolen key" })).await;
        assert_eq!(status, 202, "{backend:?}");
        assert_eq!(call(base, Method::GET, ops, &bea_key, json!({})).await.0, 401, "{backend:?}");

        // Ada finds her key was stolen and revokes it: what it proposed ends.
        let (_, listed) = call(base, Method::GET, ops, &ada_key, json!({})).await;
        let ada_row =
            listed["operators"].as_array().unwrap().iter().find(|o| o["id"] == ada.as_str()).unwrap();
        let key_id = ada_row["keys"][0]["id"].as_str().unwrap().to_string();
        let revoke = format!("/operator/v1/operator-keys/{key_id}/revoke");
        let (status, revoked) = call(base, Method::POST, &revoke, &ada_key, json!({})).await;
        assert_eq!(status, 204, "{backend:?}: {revoked}");
        let (status, _) = call(base, Method::GET, ops, &bea_key, json!({})).await;
        assert_eq!(status, 200, "{backend:?}: Bea acts again");
        assert!(!alarmed(store, &bea).await, "{backend:?}: the alarm ends with it");
        let log = store.audit_entries(0, None, 1000).await.unwrap();
        let ended = log.iter().find(|e| e.action == "operator.suspension_ended").unwrap();
        assert_eq!(ended.target_id, bea, "{backend:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_who_bends_the_targets_row_does_not_make_a_disabling_apply_at_once() {
    keyed();
    for backend in BACKENDS {
        let (app, admins) = super::grants::past_genesis(backend).await;
        let (base, store) = (app.base.as_str(), app.store());
        let ((_, ada_key), (bea, _)) = (admins.first.clone(), admins.second.clone());
        // Bea's row says treasury, and her key's row breaks: the log says
        // she is an enrolled admin still.
        let pool = sqlx::AnyPool::connect(&app.db.url).await.unwrap();
        sqlx::query("UPDATE operators SET roles = 'treasury' WHERE id = $1")
            .bind(&bea)
            .execute(&pool)
            .await
            .unwrap();
        sqlx::query("UPDATE operator_keys SET row_mac = 'broken' WHERE operator_id = $1")
            .bind(&bea)
            .execute(&pool)
            .await
            .unwrap();
        let path = format!("/operator/v1/operators/{bea}/disable");
        let (status, answer) = call(base, Method::POST, &path, &ada_key, json!({ "reason": "bent" })).await;
        assert_eq!(status, 202, "{backend:?}: suspended, not disabled for good: {answer}");
        assert!(store.operator(&bea).await.unwrap().unwrap().is_enabled(), "{backend:?}");
    }
}
