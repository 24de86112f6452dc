//! `dev show [FIELD]`: what the running `dev` announced (its JSON line), for
//! scripts and for commands to paste: `KEY=$(custody-indexer dev show api_key)`.

use std::{path::PathBuf, process::ExitCode};

use anyhow::bail;
use clap::Args;

use super::{DEFAULT_STATE_DIR, state::StateDir};

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// One field of the JSON line (`api_key`, `account_id`, `api_url`, …;
    /// a nested one with dots: `addresses.ETHEREUM_TESTNET`). A text field
    /// is printed bare, any other as JSON; without a field, the whole line.
    field: Option<String>,
    /// The running `dev`'s state directory.
    #[arg(long, value_name = "DIR", env = "CUSTODY_INDEXER_DEV_STATE_DIR", default_value = DEFAULT_STATE_DIR)]
    state_dir: PathBuf,
}

pub fn run(args: ShowArgs) -> anyhow::Result<ExitCode> {
    let summary = StateDir::existing(&args.state_dir)?.running()?.summary;
    let line = serde_json::to_value(&summary)?;
    let Some(field) = args.field else {
        println!("{line}");
        return Ok(ExitCode::SUCCESS);
    };
    match field.split('.').try_fold(&line, |value, key| value.get(key)) {
        Some(serde_json::Value::String(text)) => println!("{text}"),
        Some(value) => println!("{value}"),
        None => {
            let fields: Vec<&str> =
                line.as_object().into_iter().flat_map(|o| o.keys()).map(String::as_str).collect();
            bail!("the running dev announces no {field}; its fields are {}", fields.join(", "));
        }
    }
    Ok(ExitCode::SUCCESS)
}
