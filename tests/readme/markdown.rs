//! The command blocks of a Markdown page, and how their shown output is
//! compared with what they print.
//!
//! A fenced block whose info string starts with `sh` is a command a reader
//! is meant to run. Words after `sh` say how:
//! - nothing: run in order, in the page's shell (variables carry over);
//! - `server`: a long-running command (`run`, `serve`, `dev`) started in
//!   the background and waited for until it is ready (`/readyz` 200); it runs until the
//!   next `server` block starts (as a reader stops one with Ctrl-C before
//!   starting the next) or the page ends;
//! - `skip="why"`: not run, for the stated reason (a benchmark, the test
//!   command itself). A skip without a reason is an error.
//!
//! A ```` ```text ```` block that directly follows a command block (blank
//! lines between at most) is its output: each of its lines must appear in
//! what the block printed, in order, `…` standing for any text.

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Run,
    Server,
    Skip(String),
}

#[derive(Debug, Clone)]
pub struct Block {
    /// 1-based line of the opening fence, for messages.
    pub line: usize,
    pub kind: Kind,
    pub code: String,
    pub output: Option<String>,
}

struct Fence {
    line: usize,
    info: String,
    body: String,
}

fn fences(markdown: &str) -> Result<Vec<(Fence, bool)>, String> {
    // Each fence, and whether only blank lines separate it from the previous one.
    let mut found = Vec::new();
    let mut open: Option<Fence> = None;
    let mut adjacent = false;
    for (index, line) in markdown.lines().enumerate() {
        match open.as_mut() {
            Some(_) if line.trim_start() == "```" => {
                found.push((open.take().unwrap(), adjacent));
                adjacent = true;
            }
            Some(fence) => {
                fence.body.push_str(line);
                fence.body.push('\n');
            }
            None if line.trim_start().starts_with("```") => {
                let info = line.trim_start().trim_start_matches('`').trim().to_string();
                open = Some(Fence { line: index + 1, info, body: String::new() });
            }
            None if !line.trim().is_empty() => adjacent = false,
            None => {}
        }
    }
    match open {
        Some(fence) => Err(format!("line {}: the code block is never closed", fence.line)),
        None => Ok(found),
    }
}

fn kind(info: &str, line: usize) -> Result<Option<Kind>, String> {
    let (language, rest) = info.split_once(' ').unwrap_or((info, ""));
    if !matches!(language, "sh" | "bash" | "shell") {
        return Ok(None);
    }
    let rest = rest.trim();
    if rest.is_empty() {
        return Ok(Some(Kind::Run));
    }
    if rest == "server" {
        return Ok(Some(Kind::Server));
    }
    match rest.strip_prefix("skip=") {
        Some(reason) if reason.trim_matches('"').trim().len() > 3 => {
            Ok(Some(Kind::Skip(reason.trim_matches('"').to_string())))
        }
        _ => Err(format!(
            "line {line}: `{info}`: a command block is `sh`, `sh server` or `sh skip=\"reason\"`"
        )),
    }
}

/// The page's command blocks, in order, each with the output it shows.
pub fn blocks(markdown: &str) -> Result<Vec<Block>, String> {
    let mut blocks: Vec<Block> = Vec::new();
    for (fence, adjacent) in fences(markdown)? {
        if fence.info == "text"
            && adjacent
            && let Some(last) = blocks.last_mut().filter(|b| b.output.is_none())
        {
            last.output = Some(fence.body);
            continue;
        }
        if let Some(kind) = kind(&fence.info, fence.line)? {
            blocks.push(Block { line: fence.line, kind, code: fence.body, output: None });
        }
    }
    Ok(blocks)
}

fn line_matches(expected: &str, actual: &str) -> bool {
    let mut parts = expected.trim_end().split('…');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = actual.strip_prefix(first) else { return false };
    let parts: Vec<&str> = parts.collect();
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        if last {
            return rest.trim_end().ends_with(part);
        }
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.trim_end().is_empty()
}

/// The first line of `expected` not found, in order, in `actual`.
pub fn missing_line<'a>(expected: &'a str, actual: &str) -> Option<&'a str> {
    let mut lines = actual.lines();
    expected
        .lines()
        .filter(|l| !l.trim().is_empty())
        .find(|wanted| !lines.by_ref().any(|line| line_matches(wanted, line)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = "intro\n\n```sh\necho a\n```\n\n```text\na\n```\n\n```toml\nx = 1\n```\n\n```sh server\nrun\n```\n\n```sh skip=\"a benchmark\"\ncargo bench\n```\n\ntext\n\n```text\nnot an output\n```\n";

    #[test]
    fn finds_command_blocks_their_kind_and_shown_output() {
        let blocks = blocks(PAGE).unwrap();
        let kinds: Vec<_> = blocks.iter().map(|b| b.kind.clone()).collect();
        assert_eq!(kinds, [Kind::Run, Kind::Server, Kind::Skip("a benchmark".into())]);
        assert_eq!(blocks[0].code, "echo a\n");
        assert_eq!(blocks[0].output.as_deref(), Some("a\n"));
        assert_eq!(blocks[0].line, 3);
        assert_eq!(blocks[1].output, None);
        assert_eq!(blocks[2].output, None, "prose separates the last text block");
    }

    #[test]
    fn refuses_unclosed_blocks_and_skips_without_a_reason() {
        assert!(blocks("```sh\necho\n").unwrap_err().contains("never closed"));
        assert!(blocks("```sh skip\necho\n```\n").unwrap_err().contains("line 1"));
        assert!(blocks("```sh later\necho\n```\n").is_err());
    }

    #[test]
    fn shown_output_matches_in_order_with_ellipses() {
        let printed = "store: reachable\nETHEREUM_TESTNET  HEALTHY head 12\nhealthy\n";
        assert_eq!(missing_line("store: reachable\nETHEREUM_TESTNET  HEALTHY head …\n", printed), None);
        assert_eq!(missing_line("…HEALTHY…\nhealthy", printed), None);
        assert_eq!(missing_line("healthy\nstore: reachable", printed), Some("store: reachable"));
        assert_eq!(
            missing_line("ETHEREUM_TESTNET  UNHEALTHY…", printed),
            Some("ETHEREUM_TESTNET  UNHEALTHY…")
        );
        assert_eq!(missing_line("store", printed), Some("store"), "a line matches whole");
    }
}
