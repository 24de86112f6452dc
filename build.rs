//! Compiles the repository's chain files into the binary, so `custody-indexer`
//! runs from any directory; `--chains DIR` still replaces them at run time.

use std::{env, fs, path::PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=chains");
    let dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap()).join("chains");
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .expect("chains/ directory")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    let mut out = String::from("pub const CHAINS: &[(&str, &str)] = &[\n");
    for path in files {
        println!("cargo:rerun-if-changed={}", path.display());
        let name = path.file_name().unwrap().to_string_lossy();
        out.push_str(&format!("    ({name:?}, include_str!({:?})),\n", path.display().to_string()));
    }
    out.push_str("];\n");
    fs::write(PathBuf::from(env::var("OUT_DIR").unwrap()).join("embedded_chains.rs"), out).unwrap();
}
