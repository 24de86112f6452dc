//! Mail to people: their invitations (an enrol link only its owner may
//! hold) and notices (an organization's contact address changed, to both
//! addresses), queued in the store in the transaction of what they say, the body
//! sealed under the store's personal-data key, sent over SMTP by whichever
//! instance claims a message ([`sender`]), retried until sent, the body
//! cleared once sent. [`settings`] reads where mail goes from the
//! environment.

pub mod outgoing;
pub mod sender;
pub mod settings;

use std::time::Duration;

pub use outgoing::Outgoing;
pub use settings::{Invitations, MailSettings};

use crate::{
    pii::{Cipher, PiiError, Place},
    store::{StoreError, Tx, mail_outbox as rows, now_micros},
};

/// Where a body is sealed: its message's own place, with its recipient
/// and subject, so that a body moved to another message, or a message
/// readdressed in the store, does not open (and is not sent).
pub fn place<'a>(id: &'a str, to: &'a str, subject: &'a str) -> [&'a str; 3] {
    [id, to, subject]
}

/// Queues a message to `to` in `tx`; its body sealed with `cipher`
/// (required: a body holds a secret the store must not hold in the clear).
pub async fn queue(
    tx: &mut Tx,
    cipher: Option<&Cipher>,
    to: &str,
    subject: &str,
    body: &str,
) -> Result<String, StoreError> {
    let cipher = cipher.ok_or(StoreError::Pii(PiiError::Locked))?;
    let id = format!("mail_{}", uuid::Uuid::new_v4().simple());
    let sealed_body =
        cipher.seal(body.as_bytes(), Place { column: "mail_outbox.body", row: &place(&id, to, subject) });
    let message = Outgoing {
        id: id.clone(),
        to: to.to_string(),
        subject: subject.to_string(),
        sealed_body,
        attempts: 0,
    };
    rows::insert(tx, &message, now_micros()).await?;
    Ok(id)
}

/// An invitation's subject and body: `name`'s enrol link on the public
/// address, what it opens, and how long it works.
pub fn invitation(invitations: &Invitations, name: &str, enrol_path: &str, what: &str) -> (String, String) {
    let link = invitations.link(enrol_path);
    let subject = "Your custody-indexer enrolment link".to_string();
    let body = format!(
        "Hello {name},\r\n\r\nyou are invited to custody-indexer as {what}. Open this link within 24 hours to \
         choose your password and second factor; it works once, for you alone:\r\n\r\n{link}\r\n\r\nIf you did \
         not expect this message, do not open the link and tell your platform's administrators.\r\n"
    );
    (subject, body)
}

/// The notice of an organization's contact address changed from
/// `previous` (if it had one) to `new`, sent to both: whoever held the
/// address hears that invitations go elsewhere now.
pub fn contact_changed(organization: &str, previous: Option<&str>, new: &str) -> (String, String) {
    let subject = format!("The contact address of organization {organization} changed");
    let from = previous.map(|previous| format!(" from {previous}")).unwrap_or_default();
    let body = format!(
        "Hello,\r\n\r\nthe contact address of organization {organization} on custody-indexer was changed{from} \
         to {new}, as two of the platform's administrators approved. The invitation of the organization's \
         first console admin goes to {new} from now on.\r\n\r\nIf you did not expect this change, tell your \
         platform's administrators at once.\r\n"
    );
    (subject, body)
}

/// Queues the invitation of `to` (greeted as `name`) to `enrol_path`, as
/// `what`, in `tx`.
pub async fn queue_invitation(
    tx: &mut Tx,
    cipher: Option<&Cipher>,
    invitations: &Invitations,
    (to, name): (&str, &str),
    enrol_path: &str,
    what: &str,
) -> Result<(), StoreError> {
    let (subject, body) = invitation(invitations, name, enrol_path, what);
    queue(tx, cipher, to, &subject, &body).await.map(|_| ())
}

/// How long a message that could not be sent waits before its next try:
/// ten seconds, doubling with each try, at most an hour.
pub fn retry_after(attempts: i64) -> Duration {
    let doublings = u32::try_from(attempts.saturating_sub(1).clamp(0, 16)).unwrap_or(16);
    Duration::from_secs(10u64.saturating_mul(1 << doublings)).min(Duration::from_secs(3600))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_message_waits_longer_each_try_up_to_an_hour() {
        let cases = [(0, 10), (1, 10), (2, 20), (3, 40), (6, 320), (9, 2560), (10, 3600), (40, 3600)];
        for (attempts, secs) in cases {
            assert_eq!(retry_after(attempts), Duration::from_secs(secs), "{attempts}");
        }
    }

    #[test]
    fn a_contact_change_names_both_addresses() {
        let (subject, body) = contact_changed("acme", Some("boss@acme.example"), "cfo@acme.example");
        assert_eq!(subject, "The contact address of organization acme changed");
        assert!(body.contains("changed from boss@acme.example to cfo@acme.example"), "{body}");
        let (_, body) = contact_changed("acme", None, "cfo@acme.example");
        assert!(body.contains("was changed to cfo@acme.example"), "{body}");
    }

    #[test]
    fn an_invitation_holds_the_link_on_the_public_address() {
        let invitations = Invitations::new("https://custody.example/platform".parse().unwrap());
        let (_, body) = invitation(&invitations, "Bea", "/console/enrol/tok", "an operator");
        assert!(body.contains("https://custody.example/platform/console/enrol/tok\r\n"), "{body}");
        assert!(body.starts_with("Hello Bea,"));
    }
}
