//! The house's layout, read from the code: the rules docs/architecture.md
//! states, each checked here so that a change that breaks one fails.
//!
//! - no import circle among `src/` files;
//! - no file over 500 lines, no function over 80 (unit tests aside);
//! - a `store/` file imports model types only (the rooms [`MODEL`] names);
//! - the store writes only over a transaction its caller holds: no store
//!   function opens one (but `Store::begin`) or writes without one, and
//!   no statement runs outside the store;
//! - no wing imports `api/` or `console/` (only the doors do);
//! - a `match` on a chain's family, or a comparison with one, is written in
//!   `src/family/` alone (and in the families' own `evm/`, `solana/`);
//! - docs/architecture.md names every top-level folder of `src/`.
//!
//! The code is read as text: comments and string literals are blanked, the
//! `use` declarations and the `crate::`/`super::` paths are resolved to the
//! files that define what they name (through re-exports).

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::{Path, PathBuf},
};

/// The rooms a `store/` file may import: model types and pure rules.
/// A top-level name alone is the whole module.
const MODEL: &[&str] = &[
    "account.rs",
    "alarm.rs",
    "amount.rs",
    "audit/chain.rs",
    "audit/detail.rs",
    "bank/answers.rs",
    "chain.rs",
    "config",
    "conversions/off_ramp/rules.rs",
    "conversions/quote.rs",
    "conversions/resource.rs",
    "conversions/state.rs",
    "deposits/ids.rs",
    "deposits/resource.rs",
    "environment.rs",
    "family/rules.rs",
    "identity/resource.rs",
    "identity/state.rs",
    "identity/status.rs",
    "issuance/resource.rs",
    "issuance/rows.rs",
    "issuance/state.rs",
    "mail/outgoing.rs",
    "operators/resource.rs",
    "people/resource.rs",
    "people/rules.rs",
    "pii.rs",
    "redact.rs",
    "request_signature.rs",
    "transfers/lineage.rs",
    "transfers/model.rs",
    "transfers/resource.rs",
    "transfers/rules.rs",
];

/// The model types of a wing's `mod.rs`, which holds its flows too: a
/// `store/` file may import these names of it alone.
const MODEL_ITEMS: &[(&str, &[&str])] = &[
    ("audit/mod.rs", &["Actor"]),
    ("deposits/quorum/mod.rs", &["Claimed", "Dispute", "Outcome", "UrlAnswer"]),
    ("events/mod.rs", &["DEPOSIT_V2", "Event"]),
    ("keys/mod.rs", &["FIRST_ACCOUNT_INDEX", "KeyError"]),
    (
        "reconcile/mod.rs",
        &[
            "Anchor",
            "Baseline",
            "Credit",
            "Debit",
            "Repair",
            "RepairScope",
            "RepairStatus",
            "Run",
            "Term",
            "TermKind",
            "Watched",
        ],
    ),
];

/// The doors: what calls the wings. Only these may import `api/`; only the
/// server mounts `console/`.
const DOORS: &[&str] = &["api", "cli", "console", "dev", "main.rs", "server.rs", "service"];

const MAX_FILE_LINES: usize = 500;
const MAX_FUNCTION_LINES: usize = 80;

#[test]
fn the_house_keeps_its_layout_rules() {
    let house = House::read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(house.files.len() > 100, "the source files are read: {}", house.files.len());
    let mut broken = Vec::new();
    broken.extend(house.circles().into_iter().map(|c| format!("import circle: {}", c.join(" -> "))));
    broken.extend(house.long_files());
    broken.extend(house.long_functions());
    broken.extend(house.store_imports());
    broken.extend(house.store_writes());
    broken.extend(house.door_imports());
    broken.extend(house.family_matches());
    broken.extend(folders_described(&house));
    assert!(broken.is_empty(), "{} layout rule(s) broken:\n{}", broken.len(), broken.join("\n"));
}

/// Each rule fails on a house that breaks it: the checks read what they
/// claim to read.
#[test]
fn each_rule_fails_when_broken() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    let write = |path: &str, text: &str| {
        let path = src.join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    };
    write("lib.rs", "pub mod api;\npub mod audit;\npub mod chain;\npub mod deposits;\npub mod store;\n");
    write("audit/mod.rs", "pub struct Actor;\npub fn append() {}\n");
    write("chain.rs", "pub enum Family { Evm, Solana }\n");
    write("api/mod.rs", "use crate::deposits::watcher::Step;\npub struct ApiState;\n");
    write("deposits/mod.rs", "pub mod resource;\npub mod watcher;\n");
    write("deposits/resource.rs", "pub struct Deposit;\n");
    write(
        "deposits/watcher.rs",
        "use crate::{api::ApiState, chain::Family};\npub struct Step;\n\
         fn kind(f: Family) -> u8 {\n    match f {\n        Family::Evm => 1,\n        Family::Solana => 2,\n    }\n}\n\
         fn pair(f: Family) -> u8 {\n    match (0, f) {\n        (0, crate::chain::Family::Evm) => 1,\n        _ => 2,\n    }\n}\n\
         fn evm(f: Family) -> bool {\n    f == crate::chain::Family::Evm\n}\n\
         async fn sql(pool: &AnyPool) {\n    use sqlx::query;\n    query(\"DELETE FROM deposits\").execute(pool).await;\n}\n",
    );
    write(
        "store/mod.rs",
        &format!(
            "// crate::deposits::watcher in a comment is no import\nuse crate::deposits::{{resource::Deposit, watcher::Step}};\nuse crate::audit::{{Actor, append}};\n\
             const SQL: &str = \"crate::api::ApiState\";\nfn long() {{\n{}}}\n",
            "    let _ = 1;\n".repeat(MAX_FUNCTION_LINES)
        ),
    );
    write(
        "store/rows.rs",
        "pub async fn touch(pool: &AnyPool) {\n    sqlx::query(\"UPDATE sessions SET seen = 1\").execute(pool).await;\n}\n\
         pub async fn flow(pool: &AnyPool) {\n    let tx = pool.begin().await;\n}\n\
         pub async fn row(tx: &mut Tx) {\n    sqlx::query(\"UPDATE sessions SET seen = 1\").execute(&mut **tx).await;\n}\n\
         pub async fn state(pool: &AnyPool, state: TxState) {\n    sqlx::query(\"DELETE FROM sessions\").execute(pool).await;\n}\n\
         pub async fn mixed(&self, tx: &mut Tx) {\n    sqlx::query(\"UPDATE sessions s SET seen = 1\").execute(&self.pool).await;\n}\n\
         pub async fn read(pool: &AnyPool) {\n    sqlx::query(\"SELECT seen FROM sessions\").fetch_all(pool).await;\n}\n",
    );
    let house = House::read(src);
    let writes = house.store_writes();
    assert_eq!(
        writes,
        vec![
            "deposits/watcher.rs: runs a statement outside the store".to_string(),
            "store/rows.rs: fn touch writes rows outside its caller's transaction".into(),
            "store/rows.rs: fn flow opens a transaction of its own".into(),
            "store/rows.rs: fn state writes rows outside its caller's transaction".into(),
            "store/rows.rs: fn mixed writes rows outside its caller's transaction".into(),
        ]
    );
    let circles = house.circles();
    assert_eq!(circles, vec![vec!["api/mod.rs".to_string(), "deposits/watcher.rs".into()]]);
    let store = house.store_imports();
    assert_eq!(store.len(), 2, "{store:?}");
    assert!(store.iter().any(|s| s.contains("audit::append")), "a flow of a model room's mod.rs: {store:?}");
    assert!(store.iter().any(|s| s.contains("deposits/watcher.rs")), "{store:?}");
    let doors = house.door_imports();
    assert_eq!(doors.len(), 1, "{doors:?}");
    assert!(doors[0].starts_with("deposits/watcher.rs"), "{doors:?}");
    let family = house.family_matches();
    assert_eq!(family.len(), 4, "an arm alone or in a tuple, a comparison: {family:?}");
    let long = house.long_functions();
    assert_eq!(long.len(), 1, "{long:?}");
    assert!(long[0].contains("store/mod.rs") && long[0].contains("long"), "{long:?}");
    write("deposits/resource.rs", &"pub struct Deposit;\n".repeat(MAX_FILE_LINES + 1));
    let house = House::read(src);
    assert_eq!(house.long_files().len(), 1);
}

/// The top-level folders of `src/` that docs/architecture.md does not name
/// (as `` `name/` ``).
fn folders_described(house: &House) -> Vec<String> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = fs::read_to_string(manifest.join("docs/architecture.md")).expect("docs/architecture.md");
    let folders: BTreeSet<&str> =
        house.files.keys().filter_map(|f| f.split_once('/').map(|(top, _)| top)).collect();
    assert!(folders.len() > 10, "{folders:?}");
    folders
        .into_iter()
        .filter(|top| !doc.contains(&format!("`{top}/`")))
        .map(|top| format!("docs/architecture.md does not describe src/{top}/"))
        .collect()
}

/// A source file, read.
struct File {
    /// Its module path (`store::mints` is `["store", "mints"]`).
    module: Vec<String>,
    /// Its code without comments, string contents or unit tests.
    code: String,
    /// Its code without unit tests, strings kept (the store's SQL).
    raw: String,
    lines: usize,
}

struct House {
    /// By path under `src/` (`store/mints.rs`).
    files: BTreeMap<String, File>,
}

/// An import of one file: the absolute path it names, and whether it is a
/// re-export (`pub use`, `pub(crate) use`), through which a name is found.
struct Import {
    path: Vec<String>,
    reexport: bool,
}

impl House {
    fn read(src: &Path) -> House {
        let mut files = BTreeMap::new();
        for path in rust_files(src) {
            let rel = path.strip_prefix(src).unwrap().to_string_lossy().replace('\\', "/");
            let text = fs::read_to_string(&path).unwrap();
            let module = module_of(&rel);
            let raw = strip_unit_tests(&text);
            let code = blank(&raw);
            files.insert(rel, File { module, code, raw, lines: text.lines().count() });
        }
        House { files }
    }

    /// The file that defines module `module`, if any.
    fn file_of(&self, module: &[String]) -> Option<&str> {
        let base = module.join("/");
        let candidates = if module.is_empty() {
            vec!["lib.rs".to_string()]
        } else {
            vec![format!("{base}.rs"), format!("{base}/mod.rs")]
        };
        candidates.into_iter().find_map(|c| self.files.get_key_value(&c).map(|(k, _)| k.as_str()))
    }

    /// The file an absolute path's item is defined in, through re-exports.
    fn target(&self, path: &[String], depth: usize) -> Option<&str> {
        let k = (0..=path.len()).rev().find(|k| self.file_of(&path[..*k]).is_some())?;
        let file = self.file_of(&path[..k])?;
        let Some(item) = path.get(k) else { return Some(file) };
        if depth < 6 {
            for import in self.imports(file).into_iter().filter(|i| i.reexport) {
                let named = import.path.last() == Some(item) && import.path.as_slice() != path;
                if let Some(found) = named.then(|| self.target(&import.path, depth + 1)).flatten() {
                    return Some(found);
                }
            }
        }
        Some(file)
    }

    /// What `file` imports, each path absolute.
    fn imports(&self, file: &str) -> Vec<Import> {
        let here = &self.files[file];
        let mut out = Vec::new();
        for (statement, reexport) in use_statements(&here.code) {
            for path in expand(&statement) {
                if let Some(path) = self.absolute(file, &path) {
                    out.push(Import { path, reexport });
                }
            }
        }
        for path in inline_paths(&here.code) {
            if let Some(path) = self.absolute(file, &path) {
                out.push(Import { path, reexport: false });
            }
        }
        out
    }

    /// `path` as written in `file`, made absolute; `None` for another crate's.
    fn absolute(&self, file: &str, path: &[String]) -> Option<Vec<String>> {
        let here = &self.files[file];
        let parent = |m: &[String]| m[..m.len().saturating_sub(1)].to_vec();
        let mut base = match path.first().map(String::as_str) {
            Some("crate") => Vec::new(),
            Some("self") => here.module.clone(),
            Some("super") => parent(&here.module),
            // A child module: of a `mod.rs`, or a file's own folder's.
            Some(first) => {
                let mut child = here.module.clone();
                child.push(first.to_string());
                self.file_of(&child)?;
                return Some(here.module.iter().chain(path).cloned().collect());
            }
            None => return None,
        };
        let mut rest = &path[1..];
        while rest.first().map(String::as_str) == Some("super") {
            base = parent(&base);
            rest = &rest[1..];
        }
        base.extend(rest.iter().filter(|s| *s != "self").cloned());
        Some(base)
    }

    /// The arrows between files: every `use` and path, re-exports too.
    fn arrows(&self) -> BTreeMap<&str, BTreeSet<&str>> {
        let mut arrows: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for file in self.files.keys() {
            let entry = arrows.entry(file).or_default();
            for import in self.imports(file) {
                // The file the path names: a name handed on by a `mod.rs`
                // is that folder's.
                let target = self.target(&import.path, 6);
                if let Some(target) = target.filter(|t| t != file && *t != "lib.rs" && !face_of(file, t)) {
                    entry.insert(target);
                }
            }
        }
        arrows
    }

    /// Every import circle: each strongly connected set of files, sorted.
    fn circles(&self) -> Vec<Vec<String>> {
        let arrows = self.arrows();
        let reach = |from: &str| {
            let mut seen = BTreeSet::new();
            let mut todo = vec![from];
            while let Some(file) = todo.pop() {
                for next in arrows.get(file).into_iter().flatten() {
                    if seen.insert(*next) {
                        todo.push(next);
                    }
                }
            }
            seen
        };
        let reached: BTreeMap<&str, BTreeSet<&str>> = arrows.keys().map(|f| (*f, reach(f))).collect();
        let mut circles = BTreeSet::new();
        for (file, from) in &reached {
            let circle: Vec<String> = from
                .iter()
                .filter(|other| reached[*other].contains(file))
                .map(|other| other.to_string())
                .collect();
            if circle.len() > 1 {
                circles.insert(circle);
            }
        }
        circles.into_iter().collect()
    }

    fn long_files(&self) -> Vec<String> {
        self.files
            .iter()
            .filter(|(_, f)| f.lines > MAX_FILE_LINES)
            .map(|(name, f)| format!("{name}: {} lines, over {MAX_FILE_LINES}", f.lines))
            .collect()
    }

    fn long_functions(&self) -> Vec<String> {
        let mut out = Vec::new();
        // Unit tests aside: a module's `tests.rs`, as its inline tests are.
        for (name, file) in self.files.iter().filter(|(name, _)| !name.ends_with("tests.rs")) {
            for (function, lines) in functions(&file.code) {
                if lines > MAX_FUNCTION_LINES {
                    out.push(format!("{name}: fn {function} is {lines} lines, over {MAX_FUNCTION_LINES}"));
                }
            }
        }
        out
    }

    /// A `store/` file's imports of what is not a model room.
    fn store_imports(&self) -> Vec<String> {
        let model = |target: &str, path: &[String]| {
            // The name the path takes from the file's module.
            let item = path.get(self.files[target].module.len()).map(String::as_str);
            target.starts_with("store/")
                || MODEL.iter().any(|m| target == *m || target.starts_with(&format!("{m}/")))
                || MODEL_ITEMS
                    .iter()
                    .any(|(m, items)| target == *m && item.is_some_and(|i| items.contains(&i)))
        };
        let mut out = BTreeSet::new();
        for file in self.files.keys().filter(|f| f.starts_with("store/")) {
            for import in self.imports(file) {
                match self.target(&import.path, 0) {
                    Some(target) if !model(target, &import.path) => {
                        out.insert(format!("{file} imports {} from {target}", import.path.join("::")));
                    }
                    _ => {}
                }
            }
        }
        out.into_iter().collect()
    }

    /// The store's functions that open a transaction of their own (but
    /// `Store::begin` and the migration's) or write a row without one their
    /// caller holds: every write is a row function over the wing's `Tx`.
    fn store_writes(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (name, file) in self.files.iter().filter(|(n, _)| !n.starts_with("store/")) {
            // Its error type aside, nothing of sqlx is used outside the store.
            let used =
                file.code.match_indices("sqlx::").any(|(at, _)| !file.code[at + 6..].starts_with("Error"));
            if used {
                out.push(format!("{name}: runs a statement outside the store"));
            }
        }
        for (name, file) in self.files.iter().filter(|(n, _)| n.starts_with("store/")) {
            let raw: Vec<&str> = file.raw.lines().collect();
            for (function, start, len) in function_spans(&file.code) {
                if OWN_TRANSACTIONS.contains(&(name.as_str(), function.as_str())) {
                    continue;
                }
                let code: Vec<&str> = file.code.lines().skip(start).take(len).collect();
                let head_end = code.iter().position(|l| l.trim_end().ends_with('{')).unwrap_or(0);
                let head = code[..=head_end].join(" ");
                let body = code.join("\n");
                if [".begin(", ".begin_with("].iter().any(|b| body.contains(b)) {
                    out.push(format!("{name}: fn {function} opens a transaction of its own"));
                }
                // A connection of the pool commits each statement: only a
                // transaction is held.
                let held = ["Tx", "Transaction"].iter().any(|t| has_word(&head, t));
                let on_pool = ["self.pool", "acquire("].iter().any(|p| body.contains(p));
                let sql = raw[start..(start + len).min(raw.len())].join("\n");
                if head.contains("async") && (!held || on_pool) && writes_rows(&sql) {
                    out.push(format!("{name}: fn {function} writes rows outside its caller's transaction"));
                }
            }
        }
        out
    }

    /// A wing's imports of `api/` or `console/`, and the API's of the console.
    fn door_imports(&self) -> Vec<String> {
        let top = |file: &str| file.split('/').next().unwrap_or(file).to_string();
        let mut out = BTreeSet::new();
        for file in self.files.keys() {
            let from = top(file);
            for import in self.imports(file) {
                let Some(target) = self.target(&import.path, 0) else { continue };
                let to = top(target);
                let door = DOORS.contains(&from.as_str());
                let refused = match to.as_str() {
                    "api" => !door,
                    "console" => from != "console" && from != "server.rs",
                    _ => false,
                };
                if refused {
                    out.insert(format!("{file} imports {}", import.path.join("::")));
                }
            }
        }
        out.into_iter().collect()
    }

    /// The arms of a `match` on a chain's family, and the comparisons with
    /// one, outside `src/family/` and the families' own folders.
    fn family_matches(&self) -> Vec<String> {
        let own = |n: &str| ["family/", "evm/", "solana/"].iter().any(|f| n.starts_with(f));
        let mut out = Vec::new();
        for (name, file) in self.files.iter().filter(|(n, _)| !own(n)) {
            for (number, line) in file.code.lines().enumerate() {
                // The pattern of an arm: what stands before its `=>`.
                let pattern = line.split_once("=>").map(|(pattern, _)| pattern);
                let arm = pattern.is_some_and(|p| FAMILIES.iter().any(|v| p.contains(v)));
                if arm || compares_family(line) {
                    out.push(format!(
                        "{name}:{}: a decision on a chain's family: {}",
                        number + 1,
                        line.trim()
                    ));
                }
            }
        }
        out
    }
}

/// Whether one of `a` and `b` is the face of a folder that holds the
/// other (its `mod.rs`, or `name.rs` beside `name/`): a folder's face,
/// whose arrows to and from its own files are not drawn (a file reads its
/// parent's names as `super::`).
fn face_of(a: &str, b: &str) -> bool {
    let holds = |face: &str, file: &str| {
        let folder = face
            .strip_suffix("mod.rs")
            .map(str::to_string)
            .or_else(|| face.strip_suffix(".rs").map(|stem| format!("{stem}/")));
        folder.is_some_and(|folder| file.starts_with(&folder) && file != face)
    };
    holds(a, b) || holds(b, a)
}

/// The store's own transactions: `Store::begin`, and the migration's
/// (its guards put in place, its positions compacted).
const OWN_TRANSACTIONS: &[(&str, &str)] = &[
    ("store/mod.rs", "begin"),
    ("store/mod.rs", "migrate"),
    ("store/deposits/positions.rs", "compact_positions"),
    ("store/audit/audit_guard.rs", "install"),
];

/// Whether `text` holds `word` whole (`Tx`, not `TxState`).
fn has_word(text: &str, word: &str) -> bool {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(word)
        .any(|(at, _)| !text[..at].ends_with(ident) && !text[at + word.len()..].starts_with(ident))
}

/// Whether `sql` holds a statement that writes a row.
fn writes_rows(sql: &str) -> bool {
    let upper = sql.to_uppercase();
    let words: Vec<&str> =
        upper.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|w| !w.is_empty()).collect();
    words.windows(2).any(|w| {
        w == ["INSERT", "INTO"]
            || w == ["INSERT", "OR"]
            || w == ["REPLACE", "INTO"]
            || w == ["DELETE", "FROM"]
    }) || words.windows(3).any(|w| w[0] == "UPDATE" && w[2] == "SET")
        || words.windows(4).any(|w| w[0] == "UPDATE" && w[3] == "SET")
}

const FAMILIES: [&str; 2] = ["Family::Evm", "Family::Solana"];

/// Whether `line` compares with a family (`==`, `!=`, `matches!`).
fn compares_family(line: &str) -> bool {
    FAMILIES.iter().any(|family| {
        line.match_indices(family).any(|(at, _)| {
            let before = line[..at].trim_end_matches(|c: char| c.is_alphanumeric() || c == '_' || c == ':');
            let after = line[at + family.len()..].trim_start();
            before.trim_end().ends_with("==")
                || before.trim_end().ends_with("!=")
                || after.starts_with("==")
                || after.starts_with("!=")
                || line[..at].contains("matches!(")
        })
    })
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// `store/mints.rs` is `store::mints`; `store/mod.rs` is `store`.
fn module_of(rel: &str) -> Vec<String> {
    let stem = rel.trim_end_matches(".rs");
    let stem = stem.strip_suffix("/mod").unwrap_or(stem);
    if stem == "lib" || stem == "main" {
        return Vec::new();
    }
    stem.split('/').map(str::to_string).collect()
}

/// The text before the file's `#[cfg(test)] mod …` (the unit tests).
fn strip_unit_tests(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let inline_module = |next: &&str| next.starts_with("mod ") && next.trim_end().ends_with('{');
        if line == "#[cfg(test)]" && lines.peek().is_some_and(inline_module) {
            break;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// `code` with its comments and the contents of its string and character
/// literals blanked, lines kept.
fn blank(code: &str) -> String {
    let chars: Vec<char> = code.chars().collect();
    let mut out = String::with_capacity(code.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            i += 2;
            while i + 1 < chars.len() && !(chars[i] == '*' && chars[i + 1] == '/') {
                if chars[i] == '\n' {
                    out.push('\n');
                }
                i += 1;
            }
            i += 2;
        } else if c == 'r' && (next == Some('"') || next == Some('#')) && !ident_before(&chars, i) {
            let hashes = chars[i + 1..].iter().take_while(|c| **c == '#').count();
            if chars.get(i + 1 + hashes) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            i += 2 + hashes;
            let close: String = std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
            out.push('"');
            while i < chars.len() && !chars[i..].iter().collect::<String>().starts_with(&close) {
                if chars[i] == '\n' {
                    out.push('\n');
                }
                i += 1;
            }
            out.push('"');
            i += close.len();
        } else if c == '"' {
            out.push('"');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                }
                if chars.get(i) == Some(&'\n') {
                    out.push('\n');
                }
                i += 1;
            }
            out.push('"');
            i += 1;
        } else if c == '\'' && next == Some('\\') {
            let end = chars[i + 2..].iter().position(|c| *c == '\'').map_or(chars.len(), |p| i + 3 + p);
            out.push_str("' '");
            i = end;
        } else if c == '\'' && chars.get(i + 2) == Some(&'\'') {
            out.push_str("' '");
            i += 3;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn ident_before(chars: &[char], i: usize) -> bool {
    i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')
}

/// Each `use …;` of `code`, its body, and whether it is public (a re-export).
fn use_statements(code: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = find_word(rest, "use ") {
        // The words before `use` on its line: `pub`, `pub(crate)`, …
        let prefix = rest[..at].rsplit('\n').next().unwrap_or_default().trim();
        let reexport = prefix == "pub" || prefix.starts_with("pub(");
        let body_start = at + 4;
        let Some(end) = rest[body_start..].find(';') else { break };
        out.push((rest[body_start..body_start + end].to_string(), reexport));
        rest = &rest[body_start + end + 1..];
    }
    out
}

/// Where `word` begins a word in `text`.
fn find_word(text: &str, word: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(found) = text[from..].find(word) {
        let at = from + found;
        let prev = text[..at].chars().next_back();
        if prev.is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == ':')) {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

/// The paths of a `use` body, braces expanded, `as` renames dropped.
fn expand(body: &str) -> Vec<Vec<String>> {
    let mut compact = String::new();
    let mut words = body.split_whitespace();
    while let Some(word) = words.next() {
        if word == "as" {
            // The new name, and what follows it (`MintStatus},`).
            let renamed = words.next().unwrap_or_default();
            compact.extend(renamed.chars().skip_while(|c| c.is_alphanumeric() || *c == '_'));
        } else {
            compact.push_str(word);
        }
    }
    expand_compact(&compact)
        .into_iter()
        .map(|p| p.split("::").filter(|s| !s.is_empty() && *s != "*").map(str::to_string).collect())
        .filter(|p: &Vec<String>| !p.is_empty())
        .collect()
}

fn expand_compact(body: &str) -> Vec<String> {
    let Some(open) = body.find('{') else { return vec![body.to_string()] };
    let mut depth = 0;
    let mut close = body.len();
    for (i, c) in body.char_indices().skip(open) {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    close = i;
                    break;
                }
            }
            _ => {}
        }
    }
    let (prefix, inner) = (&body[..open], &body[open + 1..close]);
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|p| !p.is_empty())
        .flat_map(|p| expand_compact(p).into_iter().map(move |e| format!("{prefix}{e}")))
        .collect()
}

/// The `crate::…` and `super::…` paths written in code (outside `use`).
fn inline_paths(code: &str) -> Vec<Vec<String>> {
    let code: String = {
        // `use` declarations are read by `use_statements`.
        let mut kept = String::new();
        let mut rest = code;
        while let Some(at) = find_word(rest, "use ") {
            kept.push_str(&rest[..at]);
            let end = rest[at..].find(';').map_or(rest.len(), |e| at + e + 1);
            rest = &rest[end..];
        }
        kept.push_str(rest);
        kept
    };
    let mut out = Vec::new();
    for root in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(found) = find_word(&code[from..], root) {
            let at = from + found;
            let path: String =
                code[at..].chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect();
            let segments: Vec<String> =
                path.split("::").filter(|s| !s.is_empty()).map(str::to_string).collect();
            from = at + path.len().max(1);
            out.push(segments);
        }
    }
    out
}

/// Each function of `code` (a line holding `fn name` and, at its
/// indentation, the `}` that closes it) and its length in lines.
fn functions(code: &str) -> Vec<(String, usize)> {
    function_spans(code).into_iter().map(|(name, _, len)| (name, len)).collect()
}

/// Each function of `code`: its name, its first line (from 0) and its
/// length in lines.
fn function_spans(code: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = code.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let Some(at) = find_word(trimmed, "fn ") else { continue };
        let head = &trimmed[..at];
        let starts = head.is_empty()
            || head
                .split_whitespace()
                .all(|w| ["pub", "async", "const", "unsafe", "extern"].contains(&w) || w.starts_with("pub("));
        if !starts {
            continue;
        }
        let name: String =
            trimmed[at + 3..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        if trimmed.contains('{') && trimmed.trim_end().ends_with('}') {
            out.push((name, i, 1));
            continue;
        }
        let indent = line.len() - trimmed.len();
        let close = format!("{}}}", " ".repeat(indent));
        // A declaration without a body (a trait's) ends at its `;`.
        let body = lines[i..].iter().position(|l| l.trim_end().ends_with('{') || l.trim_end().ends_with(';'));
        if body.is_some_and(|b| lines[i + b].trim_end().ends_with(';')) {
            continue;
        }
        if let Some(end) =
            lines[i..].iter().position(|l| l.trim_end() == close || l.trim_end() == format!("{close},"))
        {
            out.push((name, i, end + 1));
        } else if let Some(end) = lines[i..]
            .iter()
            .position(|l| l.trim_end().ends_with('}') && l.len() - l.trim_start().len() == indent)
        {
            out.push((name, i, end + 1));
        }
    }
    out
}
