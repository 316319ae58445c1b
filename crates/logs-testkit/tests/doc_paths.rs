//! Every repository path the documentation names exists.
//!
//! The documents: `README.md`, `SECURITY.md` and every `docs/*.md`. In each, outside and
//! inside code blocks:
//!
//! 1. **Paths from the root.** Any run of path characters (`A-Z a-z 0-9 _ . / -`) that starts
//!    with `crates/`, `docs/`, `benches/`, `examples/`, `testdata/`, `deploy/` or `.ci/` and is
//!    not preceded by a path character, with or without backticks (SECURITY.md writes tests as
//!    `crates/…/file.rs::test`: the path ends at the `::`). A trailing `.` ends the sentence,
//!    not the path. A run followed by `*`, `<` or `{` is a pattern (`docs/*.md`) and is not
//!    checked. Paths under what `.gitignore` names as made by the tools (`benches/data`,
//!    `benches/peers/out`, `benches/peers/.venv`) are not checked.
//! 2. **Relative file paths in backticks.** A backticked word with a `/`, a file extension
//!    (`.rs`, `.py`, `.toml`, `.md`, `.json`, `.cfg`, `.txt`) and no `:`, `<`, `*`, `~` or
//!    leading `/` (`storage/budget.rs`, `tests/clients/loader.py`) must exist from the root,
//!    from some crate's folder (`crates/<crate>/`) or from some crate's `src/`.
//! 3. **Links.** A Markdown link's target that is not a URL (`http:`, `https:`, `mailto:`) must
//!    exist relative to the document's folder; its `#anchor`, in a `.md` file, must be a
//!    heading of that file (GitHub's slugs: lower case, punctuation dropped, spaces to `-`).
//!
//! A failure lists every missing path with its document and line.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

const ROOTS: [&str; 7] = ["crates/", "docs/", "benches/", "examples/", "testdata/", "deploy/", ".ci/"];
const GENERATED: [&str; 3] = ["benches/data", "benches/peers/out", "benches/peers/.venv"];
const EXTENSIONS: [&str; 7] = [".rs", ".py", ".toml", ".md", ".json", ".cfg", ".txt"];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("the crate sits two folders below the repository's root")
        .to_path_buf()
}

fn documents(root: &Path) -> Vec<PathBuf> {
    let mut docs = vec![root.join("README.md"), root.join("SECURITY.md")];
    let mut in_docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/ can be listed")
        .map(|entry| entry.expect("a docs/ entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    in_docs.sort();
    docs.extend(in_docs);
    docs
}

fn is_path_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '/' | '-')
}

/// Rule 1: the paths from the root on one line.
fn root_paths(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    let chars: Vec<(usize, char)> = line.char_indices().collect();
    let mut i = 0;
    while i < chars.len() {
        let (at, c) = chars[i];
        let starts_run = i == 0 || !is_path_char(chars[i - 1].1);
        if starts_run && is_path_char(c) && ROOTS.iter().any(|r| line[at..].starts_with(r)) {
            let mut j = i;
            while j < chars.len() && is_path_char(chars[j].1) {
                j += 1;
            }
            let end = chars.get(j).map_or(line.len(), |&(e, _)| e);
            let next = chars.get(j).map(|&(_, n)| n);
            let path = line[at..end].trim_end_matches('.');
            if !matches!(next, Some('*' | '<' | '{')) && !GENERATED.iter().any(|g| path.starts_with(g)) {
                found.push(path.to_string());
            }
            i = j;
        } else {
            i += 1;
        }
    }
    found
}

/// Rule 2: relative file paths in backticks on one line.
fn backticked_relative_paths(line: &str) -> Vec<String> {
    line.split('`')
        .skip(1)
        .step_by(2)
        .filter(|word| {
            word.contains('/')
                && EXTENSIONS.iter().any(|ext| word.ends_with(ext))
                && !word.contains([':', '<', '*', '~', ' ', '…'])
                && !word.starts_with('/')
                && !ROOTS.iter().any(|r| word.starts_with(r))
        })
        .map(str::to_string)
        .collect()
}

/// Rule 3: link targets on one line.
fn link_targets(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        let tail = &rest[at + 2..];
        let Some(end) = tail.find(')') else { break };
        let target = &tail[..end];
        if !["http:", "https:", "mailto:"].iter().any(|s| target.starts_with(s)) {
            found.push(target.to_string());
        }
        rest = &tail[end..];
    }
    found
}

/// GitHub's anchor of a heading.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a Markdown file's headings (code blocks left out; repeats get `-1`, `-2`…).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = BTreeSet::new();
    let mut in_code = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code || !line.starts_with('#') {
            continue;
        }
        let base = slug(line.trim_start_matches('#'));
        let n = seen.entry(base.clone()).or_insert(0);
        out.insert(if *n == 0 { base.clone() } else { format!("{base}-{n}") });
        *n += 1;
    }
    out
}

fn crate_dirs(root: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .expect("crates/ can be listed")
        .map(|entry| entry.expect("a crates/ entry").path())
        .filter(|path| path.is_dir())
        .collect();
    dirs.push(root.join("benches"));
    dirs
}

fn missing_paths(root: &Path) -> Vec<String> {
    let crates = crate_dirs(root);
    let mut missing = Vec::new();
    for doc in documents(root) {
        let name = doc.strip_prefix(root).expect("under the root").display().to_string();
        let text = std::fs::read_to_string(&doc).unwrap_or_else(|e| panic!("{name}: {e}"));
        let folder = doc.parent().expect("a document has a folder");
        for (n, line) in text.lines().enumerate() {
            let at = format!("{name}:{}", n + 1);
            for path in root_paths(line) {
                if !root.join(&path).exists() {
                    missing.push(format!("{at}: `{path}` does not exist"));
                }
            }
            for path in backticked_relative_paths(line) {
                let found = root.join(&path).exists()
                    || crates.iter().any(|c| c.join(&path).exists() || c.join("src").join(&path).exists());
                if !found {
                    missing.push(format!(
                        "{at}: `{path}` is neither a path from the root nor from a crate or its src/"
                    ));
                }
            }
            for target in link_targets(line) {
                let (file, anchor) = target.split_once('#').unwrap_or((&target, ""));
                let file = if file.is_empty() { doc.clone() } else { folder.join(file) };
                if !file.exists() {
                    missing.push(format!("{at}: link `{target}` names no file"));
                } else if !anchor.is_empty() && file.extension().is_some_and(|e| e == "md") {
                    let linked = std::fs::read_to_string(&file).expect("a linked document");
                    if !anchors(&linked).contains(anchor) {
                        missing.push(format!("{at}: link `{target}` names no heading"));
                    }
                }
            }
        }
    }
    missing
}

#[test]
fn every_path_the_documentation_names_exists() {
    let missing = missing_paths(&repo_root());
    assert!(
        missing.is_empty(),
        "{} path(s) named in README.md, SECURITY.md or docs/*.md do not exist:\n{}",
        missing.len(),
        missing.join("\n")
    );
}

#[test]
fn the_rules_find_what_they_should() {
    assert_eq!(
        root_paths("`crates/logs-server/src/prepared/spool.rs::tests::x`; see docs/api.md."),
        ["crates/logs-server/src/prepared/spool.rs", "docs/api.md"]
    );
    assert_eq!(root_paths("docs/*.md, /…/testdata/dataset, benches/data/x"), Vec::<String>::new());
    assert_eq!(
        backticked_relative_paths("`prepared/spool.rs` and `text/csv` and `s3://a/b.json`"),
        ["prepared/spool.rs"]
    );
    assert_eq!(
        link_targets("[a](api.md#errors) [b](https://x.org/y) [c](#limits)"),
        ["api.md#errors", "#limits"]
    );
    assert_eq!(slug(" 1. A tokens file: `--tokens FILE`"), "1-a-tokens-file---tokens-file");
    let root = repo_root();
    let crates = crate_dirs(&root);
    assert!(!crates.iter().any(|c| c.join("src/prepared/spool.rs").exists()));
}
