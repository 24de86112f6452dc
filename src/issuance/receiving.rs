//! The platform's receiving bank: where clients wire dollars to be minted,
//! as every mint instruction shows it. In `production` an operator names it
//! (`--receiving-bank FILE`, a JSON Bank account details object checked as
//! a client's is); in `sandbox` it is the sandbox bank's
//! ([`crate::bank::sandbox::receiving_account`]), where no money moves.

use std::path::Path;

use serde_json::Value;

/// The environment variable naming the receiving bank's file.
pub const RECEIVING_BANK_ENV: &str = "CUSTODY_INDEXER_RECEIVING_BANK";

/// The receiving bank of the JSON file at `path`, checked.
pub fn load(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let bank: Value =
        serde_json::from_str(&text).map_err(|e| format!("{} is not JSON: {e}", path.display()))?;
    super::bank::validate("", &bank)
        .map_err(|errors| format!("{} is not a bank account: {}", path.display(), errors.join("; ")))?;
    Ok(bank)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_checked_naming_its_path_and_fields() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bank.json");
        std::fs::write(&path, r#"{"bank_name": "B", "account_holder_name": "H"}"#).unwrap();
        let error = load(&path).unwrap_err();
        assert!(
            error.contains("bank.json is not a bank account") && error.contains("address: required"),
            "{error}"
        );
        std::fs::write(&path, crate::bank::sandbox::receiving_account().to_string()).unwrap();
        assert_eq!(load(&path).unwrap(), crate::bank::sandbox::receiving_account());
    }
}
