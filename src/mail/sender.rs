//! Sends queued mail: every few seconds an instance claims each message due
//! (one instance per message at a time), opens its body, sends it over
//! SMTP, and marks it sent (its body cleared) or puts it back for a later
//! try ([`super::retry_after`]). A message is sent at least once; a crash
//! between the relay's acceptance and the mark sends it again, with the
//! same link.

use std::{sync::Arc, time::Duration};

use lettre::{
    AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor, message::header::ContentType,
    transport::smtp::authentication::Credentials,
};
use tokio_util::sync::CancellationToken;

use super::{MailSettings, Outgoing, settings::Security};
use crate::{
    every::{Logged, every},
    pii::Place,
    store::{Store, StoreError, mail_outbox, now_micros},
};

/// How often due mail is looked for.
pub const LOOK_EVERY: Duration = Duration::from_secs(2);

/// How long a claimed message is this instance's to send.
const CLAIM: Duration = Duration::from_secs(120);

/// Why a message was not sent.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the relay cannot be reached as configured: {0}")]
    Relay(String),
}

/// Sends due mail until `stop`.
pub async fn run(store: Store, settings: Arc<MailSettings>, stop: CancellationToken) {
    let transport = match transport(&settings) {
        Ok(transport) => transport,
        Err(error) => {
            tracing::error!(error = %error, "mail is not sent");
            return;
        }
    };
    let logged = Logged { moved: "mail sent", failed: "cannot send mail" };
    let (store, settings, transport) = (&store, &settings, &transport);
    every(LOOK_EVERY, &stop, logged, move || send_due(store, settings, transport)).await;
}

/// Sends every message due now; answers how many were sent.
pub async fn send_due(
    store: &Store,
    settings: &MailSettings,
    transport: &AsyncSmtpTransport<Tokio1Executor>,
) -> Result<usize, SendError> {
    let cipher = store.cipher()?;
    let mut sent = 0;
    while let Some(message) = claim(store, now_micros(), CLAIM.as_micros() as i64).await? {
        let place = super::place(&message.id, &message.to, &message.subject);
        let opened =
            cipher.open_text(&message.sealed_body, Place { column: "mail_outbox.body", row: &place });
        let Ok(body) = opened else {
            // Readdressed or altered in the store: never sent as it stands.
            tracing::error!(message = %message.id, "a queued message does not open as sealed: altered in the store, not sent");
            let next = now_micros() + super::retry_after(message.attempts).as_micros() as i64;
            mark_failed(store, &message.id, next, "altered in the store: not sent").await?;
            continue;
        };
        match send(settings, transport, &message, body).await {
            Ok(()) => {
                mark_sent(store, &message.id, now_micros()).await?;
                tracing::info!(message = %message.id, "mail sent");
                sent += 1;
            }
            Err(error) => {
                let next = now_micros() + super::retry_after(message.attempts).as_micros() as i64;
                tracing::warn!(message = %message.id, attempts = message.attempts, error = %error, "mail not sent; tried again later");
                mark_failed(store, &message.id, next, &error).await?;
            }
        }
    }
    Ok(sent)
}

/// Claims the oldest message due at `now` for `lease` microseconds (see
/// [`mail_outbox::claim`]).
async fn claim(store: &Store, now: i64, lease: i64) -> Result<Option<Outgoing>, StoreError> {
    let mut tx = store.begin().await?;
    let message = mail_outbox::claim(&mut tx, now, lease).await?;
    tx.commit().await?;
    Ok(message)
}

/// Message `id` sent: its body cleared for good.
async fn mark_sent(store: &Store, id: &str, now: i64) -> Result<(), StoreError> {
    let mut tx = store.begin().await?;
    mail_outbox::mark_sent(&mut tx, id, now).await?;
    Ok(tx.commit().await?)
}

/// Message `id` not sent: tried again at `next_at`, `error` kept.
async fn mark_failed(store: &Store, id: &str, next_at: i64, error: &str) -> Result<(), StoreError> {
    let mut tx = store.begin().await?;
    mail_outbox::mark_failed(&mut tx, id, next_at, error).await?;
    Ok(tx.commit().await?)
}

async fn send(
    settings: &MailSettings,
    transport: &AsyncSmtpTransport<Tokio1Executor>,
    message: &Outgoing,
    body: String,
) -> Result<(), String> {
    let to = message.to.parse().map_err(|_| format!("{:?} is not an address", message.to))?;
    let email = Message::builder()
        .from(settings.from.clone())
        .to(to)
        .subject(&message.subject)
        .header(ContentType::TEXT_PLAIN)
        .body(body)
        .map_err(|e| format!("the message cannot be built: {e}"))?;
    transport.send(email).await.map(drop).map_err(|e| format!("the relay refused or failed: {e}"))
}

/// The transport of `settings`' relay.
pub fn transport(settings: &MailSettings) -> Result<AsyncSmtpTransport<Tokio1Executor>, SendError> {
    let relay = &settings.relay;
    let refused = |e: lettre::transport::smtp::Error| SendError::Relay(e.to_string());
    let builder = match relay.security {
        Security::Implicit => AsyncSmtpTransport::<Tokio1Executor>::relay(&relay.host).map_err(refused)?,
        Security::StartTls => {
            AsyncSmtpTransport::<Tokio1Executor>::starttls_relay(&relay.host).map_err(refused)?
        }
        Security::Plain => AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&relay.host),
    };
    let builder = builder.port(relay.port).timeout(Some(Duration::from_secs(30)));
    let builder = match (&relay.user, &settings.password) {
        (Some(user), Some(password)) => {
            builder.credentials(Credentials::new(user.clone(), password.to_string()))
        }
        _ => builder,
    };
    Ok(builder.build())
}
