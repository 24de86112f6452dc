//! `backfill`: a historical block (Solana: slot) range, or a Solana
//! address's signature history, scanned once beside `run`.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

use crate::{config::ChainConfig, deposits::watcher::BackfillReport, family, store::Store};

/// What `backfill --address` read: the history as of the slot every page was
/// asked at (or a later one), and the slot of its oldest signature.
fn history_line(address: &str, report: &BackfillReport) -> String {
    let span = match report.blocks {
        0 => "no signatures".to_string(),
        n => format!("{n} signatures from slot {} on", report.from),
    };
    format!(
        "read the history of {address} as of slot {} or later ({span}, in {:.3} s): {} deposits found, {} new or updated",
        report.to,
        report.elapsed.as_secs_f64(),
        report.deposits_found,
        report.deposits_changed
    )
}

/// What `backfill` reads.
pub enum Range {
    Blocks { from: u64, to: Option<u64> },
    Address { address: String, before: Option<String>, until: Option<String> },
}

pub async fn backfill(store: Store, config: ChainConfig, range: Range) -> anyhow::Result<()> {
    let chain = config.chain;
    let expected = match &range {
        Range::Blocks { from, to: Some(to) } => to.saturating_sub(*from) + 1,
        _ => 0,
    };
    let bar = ProgressBar::new(expected);
    if !std::io::stderr().is_terminal() {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    bar.set_style(
        ProgressStyle::with_template("{spinner} {pos}/{len} [{elapsed_precise}] {per_sec} {msg}")
            .expect("static template"),
    );
    let progress = |done: u64, found: usize| {
        bar.set_position(done);
        bar.set_message(format!("{found} deposits"));
    };
    let family = family::of(config.family());
    let (report, unit) = match range {
        Range::Blocks { from, to } => {
            (family.backfill(config, store, (from, to), &progress).await?, family.unit())
        }
        Range::Address { address, before, until } => {
            let report = family.backfill_address(config, store, &address, (before, until), &progress).await?;
            bar.finish_and_clear();
            println!("{chain}: {}", history_line(&address, &report));
            return Ok(());
        }
    };
    bar.finish_and_clear();
    let seconds = report.elapsed.as_secs_f64().max(1e-9);
    println!(
        "{chain}: scanned {unit} {}..={} ({} {unit} in {:.3} s, {:.0} {unit}/s): {} deposits found, {} new or updated",
        report.from,
        report.to,
        report.blocks,
        seconds,
        report.blocks as f64 / seconds,
        report.deposits_found,
        report.deposits_changed
    );
    Ok(())
}
