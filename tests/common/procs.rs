//! What a process has used so far, read from `/proc`, for the benchmarks.

use std::collections::HashMap;

/// CPU seconds (user + system) process `pid` has used so far.
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or_default().split_whitespace().collect();
    let ticks: u64 = fields.get(11..13).map_or(0, |f| f.iter().filter_map(|v| v.parse::<u64>().ok()).sum());
    ticks as f64 / 100.0
}

/// A memory figure of process `pid` in MB: `VmRSS` (now) or `VmHWM` (peak).
pub fn memory_mb(pid: u32, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kb: u64 = status
        .lines()
        .find(|line| line.starts_with(field) && line[field.len()..].starts_with(':'))
        .and_then(|line| line.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0);
    kb as f64 / 1024.0
}

/// CPU seconds of the local PostgreSQL server's processes, as last seen.
pub fn postgres_cpu(seen: &mut HashMap<u32, f64>) {
    let Ok(entries) = std::fs::read_dir("/proc") else { return };
    for pid in entries.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok()) {
        if std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "postgres") {
            seen.insert(pid, cpu_seconds(pid));
        }
    }
}

/// The PostgreSQL server's CPU seconds between two readings of [`postgres_cpu`].
pub fn postgres_cpu_between(before: &HashMap<u32, f64>, after: &HashMap<u32, f64>) -> f64 {
    after.iter().map(|(pid, cpu)| cpu - before.get(pid).copied().unwrap_or(0.0)).sum()
}
