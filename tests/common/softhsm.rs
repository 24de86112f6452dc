//! A SoftHSM2 token of its own per test (`SOFTHSM2_CONF`), and the
//! variables that make a command sign with it and no other key source.

use std::{path::PathBuf, process::Command};

pub const PIN: &str = "4711-0815";

/// A SoftHSM2 token of its own: its configuration, label and PIN file.
pub struct Token {
    pub dir: tempfile::TempDir,
    pub label: String,
}

pub fn module() -> String {
    let module =
        std::env::var("SOFTHSM2_MODULE").unwrap_or_else(|_| "/usr/lib/softhsm/libsofthsm2.so".into());
    assert!(
        std::path::Path::new(&module).exists(),
        "SoftHSM2 is missing at {module}: scripts/install-softhsm.sh installs it (scripts/test.sh runs it)"
    );
    module
}

impl Token {
    pub fn new(label: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let tokens = dir.path().join("tokens");
        std::fs::create_dir_all(&tokens).unwrap();
        let conf = format!(
            "directories.tokendir = {}\nobjectstore.backend = file\nlog.level = ERROR\n",
            tokens.display()
        );
        std::fs::write(dir.path().join("softhsm2.conf"), conf).unwrap();
        std::fs::write(dir.path().join("pin"), format!("{PIN}\n")).unwrap();
        let token = Token { dir, label: label.to_string() };
        let init = Command::new("softhsm2-util")
            .args(["--init-token", "--free", "--label", label, "--so-pin", "12345678", "--pin", PIN])
            .env("SOFTHSM2_CONF", token.conf())
            .output()
            .expect("softhsm2-util (scripts/install-softhsm.sh installs it)");
        assert!(init.status.success(), "{}", String::from_utf8_lossy(&init.stderr));
        token
    }

    pub fn conf(&self) -> PathBuf {
        self.dir.path().join("softhsm2.conf")
    }

    /// `command` signing with this token and no other key source.
    pub fn signing<'a>(&self, command: &'a mut Command) -> &'a mut Command {
        command
            .env("SOFTHSM2_CONF", self.conf())
            .env("CUSTODY_INDEXER_SIGNER", "pkcs11")
            .env("CUSTODY_INDEXER_PKCS11_MODULE", module())
            .env("CUSTODY_INDEXER_PKCS11_TOKEN", &self.label)
            .env("CUSTODY_INDEXER_PKCS11_PIN_FILE", self.dir.path().join("pin"))
            .env_remove("CUSTODY_INDEXER_MNEMONIC")
            .env_remove("CUSTODY_INDEXER_MNEMONIC_FILE")
    }

    /// Another token beside this one, in the same library's configuration
    /// (one SoftHSM2 library per process, as one HSM holds several
    /// tokens), with the same PIN.
    pub fn add_token(&self, label: &str) {
        let init = Command::new("softhsm2-util")
            .args(["--init-token", "--free", "--label", label, "--so-pin", "12345678", "--pin", PIN])
            .env("SOFTHSM2_CONF", self.conf())
            .output()
            .expect("softhsm2-util (scripts/install-softhsm.sh installs it)");
        assert!(init.status.success(), "{}", String::from_utf8_lossy(&init.stderr));
    }

    /// The variables giving the issuer its own token `label` (made by
    /// [`Token::add_token`]).
    pub fn issuer_vars(&self, label: &str) -> Vec<(String, String)> {
        vec![
            ("CUSTODY_INDEXER_ISSUER_SIGNER".into(), "pkcs11".into()),
            ("CUSTODY_INDEXER_ISSUER_PKCS11_MODULE".into(), module()),
            ("CUSTODY_INDEXER_ISSUER_PKCS11_TOKEN".into(), label.into()),
            (
                "CUSTODY_INDEXER_ISSUER_PKCS11_PIN_FILE".into(),
                self.dir.path().join("pin").display().to_string(),
            ),
        ]
    }

    /// The private keys as `pkcs11-tool` lists them.
    pub fn private_keys(&self) -> String {
        self.private_keys_of(&self.label)
    }

    /// The private keys of token `label` of this configuration.
    pub fn private_keys_of(&self, label: &str) -> String {
        let out = Command::new("pkcs11-tool")
            .args(["--module", &module(), "--token-label", label, "--login", "--pin", PIN])
            .args(["--list-objects", "--type", "privkey"])
            .env("SOFTHSM2_CONF", self.conf())
            .output()
            .expect("pkcs11-tool (scripts/install-softhsm.sh installs opensc)");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }
}

impl Token {
    /// The variables of a command signing with this token, no mnemonic.
    pub fn vars(&self) -> Vec<(String, String)> {
        let path = |p: PathBuf| p.display().to_string();
        vec![
            ("SOFTHSM2_CONF".into(), path(self.conf())),
            ("CUSTODY_INDEXER_SIGNER".into(), "pkcs11".into()),
            ("CUSTODY_INDEXER_PKCS11_MODULE".into(), module()),
            ("CUSTODY_INDEXER_PKCS11_TOKEN".into(), self.label.clone()),
            ("CUSTODY_INDEXER_PKCS11_PIN_FILE".into(), path(self.dir.path().join("pin"))),
        ]
    }

    /// The token's files moved away, as a token pulled out of its reader
    /// (the tests run as root, whom no permission keeps out): every call
    /// on it fails until [`Token::reinsert`].
    pub fn pull_out(&self) {
        std::fs::rename(self.dir.path().join("tokens"), self.dir.path().join("away")).unwrap();
    }

    pub fn reinsert(&self) {
        std::fs::rename(self.dir.path().join("away"), self.dir.path().join("tokens")).unwrap();
    }
}
