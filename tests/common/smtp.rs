//! A real SMTP listener: Python's `aiosmtpd` (from the tests' pinned
//! Python environment) keeping each message it accepts in a maildir, which
//! the tests read, as a person reads their mail.

use std::{path::PathBuf, process::Stdio, time::Duration};

use custody_indexer::mail::{
    Invitations, MailSettings,
    settings::{public_url, relay},
};

use super::cli::Process;

pub struct Smtp {
    pub port: u16,
    maildir: PathBuf,
    _dir: tempfile::TempDir,
    _process: Process,
}

impl Smtp {
    /// Listens on a free port of this machine.
    pub async fn start() -> Self {
        let python = super::python::python();
        let dir = tempfile::tempdir().unwrap();
        let maildir = dir.path().join("maildir");
        let port = super::dead_port();
        let process = std::process::Command::new(python)
            .args([
                "-m",
                "aiosmtpd",
                "-n",
                "-l",
                &format!("127.0.0.1:{port}"),
                "-c",
                "aiosmtpd.handlers.Mailbox",
            ])
            .arg(&maildir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map(Process)
            .expect("aiosmtpd starts");
        super::eventually(Duration::from_secs(30), "the SMTP listener", || async {
            tokio::net::TcpStream::connect(("127.0.0.1", port)).await.ok().map(drop)
        })
        .await;
        Smtp { port, maildir, _dir: dir, _process: process }
    }

    /// The relay's URL, plain to this machine.
    pub fn url(&self) -> String {
        format!("smtp://127.0.0.1:{}", self.port)
    }

    /// Mail settings sending through this listener, links on `public`.
    pub fn settings(&self, public: &str) -> MailSettings {
        MailSettings {
            relay: relay(&self.url()).unwrap(),
            password: None,
            from: "custody-indexer <custody@platform.example>".parse().unwrap(),
            invitations: Invitations::new(public_url(public).unwrap()),
        }
    }

    /// Every message received so far, as stored, oldest first.
    pub fn messages(&self) -> Vec<String> {
        let mut found = Vec::new();
        for sub in ["new", "cur"] {
            let Ok(entries) = std::fs::read_dir(self.maildir.join(sub)) else { continue };
            for entry in entries.flatten() {
                let modified = entry.metadata().and_then(|m| m.modified()).ok();
                found.push((
                    modified,
                    entry.file_name(),
                    readable(&std::fs::read_to_string(entry.path()).unwrap_or_default()),
                ));
            }
        }
        found.sort();
        found.into_iter().map(|(_, _, text)| text).collect()
    }

    /// The messages to `to`, waiting until `count` have arrived.
    pub async fn messages_to(&self, to: &str, count: usize) -> Vec<String> {
        super::eventually(Duration::from_secs(60), &format!("{count} message(s) to {to}"), || async {
            let mine: Vec<String> =
                self.messages().into_iter().filter(|m| m.lines().any(|l| l == format!("To: {to}"))).collect();
            (mine.len() >= count).then_some(mine)
        })
        .await
    }

    /// The enrol link of the `count`th message to `to`, waiting for it.
    pub async fn link_to(&self, to: &str, count: usize) -> String {
        let messages = self.messages_to(to, count).await;
        let message = &messages[count - 1];
        let link = message.lines().find(|l| l.contains("/console/enrol/"));
        link.unwrap_or_else(|| panic!("no enrol link in {message}")).trim().to_string()
    }
}

/// Mail settings whose relay nothing listens on: invitations are queued and
/// never sent (tests that read links otherwise).
pub fn unsent(public: &str) -> MailSettings {
    MailSettings {
        relay: relay(&format!("smtp://127.0.0.1:{}", super::dead_port())).unwrap(),
        password: None,
        from: "custody@platform.example".parse().unwrap(),
        invitations: Invitations::new(public_url(public).unwrap()),
    }
}

/// A message as a mail client shows it: its headers, and its body decoded
/// from quoted-printable when so sent.
fn readable(message: &str) -> String {
    let message = message.replace("\r\n", "\n");
    let Some((headers, body)) = message.split_once("\n\n") else { return message };
    if !headers.to_ascii_lowercase().contains("content-transfer-encoding: quoted-printable") {
        return message;
    }
    let joined = body.replace("=\n", "");
    let bytes = joined.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .filter(|_| bytes[i] == b'=')
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match hex {
            Some(byte) => {
                decoded.push(byte);
                i += 3;
            }
            None => {
                decoded.push(bytes[i]);
                i += 1;
            }
        }
    }
    format!("{headers}\n\n{}", String::from_utf8_lossy(&decoded))
}
