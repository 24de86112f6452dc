//! A Python virtual environment with the OpenAPI tools clients use, the
//! SMTP listener mail is tested against (`aiosmtpd`) and what the docs'
//! signed-request example runs on (PyJWT, `cryptography`, `requests`),
//! pinned:
//! made under `$HOME/.cache/custody-indexer/` when missing (the first run
//! downloads from PyPI), then reused. A test never skips for want of it: a
//! failed install fails the test with pip's output.

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
    sync::OnceLock,
};

use sha2::{Digest, Sha256};

/// The tools, pinned. `poetry-core` builds the generated client's package
/// without a download at test time (`--no-build-isolation`).
/// `openapi-generator-cli` is OpenAPI Generator's jar with a Python wrapper
/// (it runs the `java` that `scripts/install-java.sh` installs, `JAVA_BIN`).
pub const REQUIREMENTS: &[&str] = &[
    "openapi-spec-validator==0.9.0",
    "openapi-python-client==0.29.1",
    "poetry-core==2.5.0",
    "openapi-generator-cli==7.26.0",
    "aiosmtpd==1.4.6",
    // The signed-request example of docs/http-api.md, as a client runs it.
    "PyJWT==2.10.1",
    "cryptography==44.0.0",
    "requests==2.32.3",
];

/// The environment's directory: named by the pins, so changing a pin makes
/// a new one instead of reusing a stale one.
pub fn venv_dir() -> PathBuf {
    let digest = Sha256::digest(REQUIREMENTS.join("\n").as_bytes());
    let tag: String = digest[..6].iter().map(|b| format!("{b:02x}")).collect();
    let home = std::env::var_os("HOME").expect("HOME is set");
    Path::new(&home).join(".cache/custody-indexer").join(format!("openapi-tools-{tag}"))
}

/// The environment's interpreter, made ready once per test process.
pub fn python() -> &'static Path {
    static READY: OnceLock<PathBuf> = OnceLock::new();
    READY.get_or_init(|| {
        let dir = venv_dir();
        let python = dir.join("bin/python");
        if !usable(&python) {
            // A broken environment (an interrupted manual change, a removed
            // interpreter) is made anew.
            let _ = std::fs::remove_dir_all(&dir);
            create(&dir);
        }
        assert!(usable(&python), "{} was made but cannot import the tools", dir.display());
        python
    })
}

fn usable(python: &Path) -> bool {
    python.exists()
        && Command::new(python)
            .args([
                "-c",
                "import openapi_spec_validator, openapi_python_client, poetry.core, openapi_generator_cli, aiosmtpd, \
                 jwt, cryptography, requests",
            ])
            .output()
            .is_ok_and(|o| o.status.success())
}

/// Builds the environment beside `dir` and renames it into place, so a run
/// interrupted halfway, or another test process making it at the same time,
/// never leaves a half-made one at `dir`. Tools are run as `python -m …`,
/// which a moved environment still runs (its scripts' `#!` lines would not).
fn create(dir: &Path) {
    let parent = dir.parent().expect("a parent");
    std::fs::create_dir_all(parent).unwrap();
    let building = parent.join(format!(
        "{}.building-{}",
        dir.file_name().unwrap().to_string_lossy(),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&building);
    eprintln!("making the Python environment {} (once: it is cached)", dir.display());
    ok(Command::new("python3").arg("-m").arg("venv").arg(&building), "python3 -m venv");
    let pip = building.join("bin/python");
    ok(
        Command::new(&pip)
            .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check"])
            .args(REQUIREMENTS),
        "pip install of the OpenAPI tools",
    );
    if let Err(error) = std::fs::rename(&building, dir) {
        // Another process put its environment there first: use that one.
        let _ = std::fs::remove_dir_all(&building);
        assert!(dir.exists(), "cannot move {} to {}: {error}", building.display(), dir.display());
    }
}

/// Runs `command`, failing the test with its output unless it succeeds.
pub fn ok(command: &mut Command, what: &str) -> Output {
    let output = command.output().unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}
