//! No module of the workspace's crates imports, directly or through others, a module that
//! imports it back.
//!
//! The graph is read from the source, one node per file (`a.rs` or `a/mod.rs` is module `a`,
//! `a/b.rs` is `a::b`); the crate root (`lib.rs`, `main.rs`) is the facade and no node. An edge
//! goes from a file to each module its code names with a `crate::…`, `super::…` or `self::…`
//! path, in `use` trees (groups expanded) and inline: the longest existing module prefix of the
//! path, followed through `pub use` re-exports (so `crate::storage::Catalog` re-exported by
//! `storage/mod.rs` from `storage/catalog.rs` is an edge to `catalog`). A parent's `mod child;`
//! is structure, not an edge; a child naming its parent's own items is one. Tests are no nodes:
//! files named `tests.rs` or `*_tests.rs`, and everything from a file's first `#[cfg(test)]`
//! module on. A strongly connected set of two or more files is a circle, and fails the test
//! with its files.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Module path (without `crate`) → the file that defines it.
type Modules = BTreeMap<Vec<String>, PathBuf>;

#[test]
fn no_crate_has_an_import_circle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut circles = Vec::new();
    let mut crates: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .unwrap()
        .map(|entry| entry.unwrap().path().join("src"))
        .filter(|src| src.is_dir())
        .collect();
    crates.push(root.join("benches/src"));
    crates.sort();
    for src in &crates {
        let graph = import_graph(src);
        for circle in strongly_connected(&graph).into_iter().filter(|set| set.len() > 1) {
            let files: Vec<String> = circle.iter().map(|m| display(src, &graph, m)).collect();
            circles.push(format!("{}: {}", src.display(), files.join(" ⇄ ")));
        }
    }
    assert!(crates.len() >= 8, "found only {crates:?}");
    assert!(circles.is_empty(), "import circles:\n{}", circles.join("\n"));
}

/// The reader itself finds a circle and a re-export, and leaves tests and structure alone.
#[test]
fn the_reader_sees_grouped_inline_and_re_exported_paths() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    let write = |path: &str, text: &str| {
        let path = src.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write("lib.rs", "mod a; mod b; mod c; mod d;\npub use a::A;");
    write("a.rs", "use crate::{b::{self, B}, c as see};\npub struct A;");
    write("b.rs", "pub struct B;\nfn f() { crate::d::g(); }\n#[cfg(test)]\nmod tests { use crate::a::A; }");
    write("c.rs", "pub struct C;");
    write("d/mod.rs", "mod e;\npub use e::E;\npub fn g() {}");
    write("d/e.rs", "pub struct E;\nfn h() { let _ = crate::d::E; }");
    write("d/e_tests.rs", "use crate::a::A;");
    let graph = import_graph(src);
    let edges = |module: &str| -> Vec<String> {
        let key: Vec<String> = module.split("::").map(str::to_owned).collect();
        graph[&key].iter().map(|m| m.join("::")).collect()
    };
    assert_eq!(edges("a"), ["b", "c"]);
    assert_eq!(edges("b"), ["d"]);
    // `crate::d::E` is `e`'s own item, re-exported by its parent: no edge to the parent.
    assert!(edges("d::e").is_empty(), "{:?}", edges("d::e"));
    assert_eq!(edges("d"), ["d::e"]);
    assert!(strongly_connected(&graph).iter().all(|set| set.len() == 1));

    write("c.rs", "pub struct C;\nuse super::a::A;");
    let graph = import_graph(src);
    let circles: Vec<_> = strongly_connected(&graph).into_iter().filter(|set| set.len() > 1).collect();
    assert_eq!(circles.len(), 1);
    assert_eq!(circles[0].iter().map(|m| m.join("::")).collect::<Vec<_>>(), ["a", "c"]);
}

/// Each module's file and the modules its code names.
fn import_graph(src: &Path) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let mut modules = Modules::new();
    collect_modules(src, &[], &mut modules);
    let texts: BTreeMap<Vec<String>, String> = modules
        .iter()
        .map(|(module, file)| (module.clone(), without_tests(&std::fs::read_to_string(file).unwrap())))
        .collect();
    let re_exports: BTreeMap<(Vec<String>, String), Vec<String>> = texts
        .iter()
        .flat_map(|(module, text)| {
            use_paths(text, true)
                .into_iter()
                .filter_map(|(path, name)| Some(((module.clone(), name), absolute(module, &path, &modules)?)))
                .collect::<Vec<_>>()
        })
        .collect();
    let mut graph = BTreeMap::new();
    for (module, text) in texts.iter().filter(|(module, _)| !module.is_empty()) {
        let mut edges = BTreeSet::new();
        let paths = use_paths(text, false).into_iter().map(|(path, _)| path).chain(inline_paths(text));
        for path in paths {
            let Some(path) = absolute(module, &path, &modules) else { continue };
            if let Some(target) = resolve(&path, &modules, &re_exports)
                && !target.is_empty()
                && &target != module
            {
                edges.insert(target);
            }
        }
        graph.insert(module.clone(), edges);
    }
    graph
}

fn collect_modules(dir: &Path, prefix: &[String], modules: &mut Modules) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if name != "bin" {
                let mut child = prefix.to_vec();
                child.push(name);
                collect_modules(&path, &child, modules);
            }
            continue;
        }
        if path.extension().is_none_or(|ext| ext != "rs") || name == "tests" || name.ends_with("_tests") {
            continue;
        }
        let mut module = prefix.to_vec();
        if !matches!(name.as_str(), "mod" | "lib" | "main") {
            module.push(name);
        } else if name != "mod" && !prefix.is_empty() {
            continue;
        }
        modules.insert(module, path);
    }
}

/// The text before the file's first `#[cfg(test)]` module.
fn without_tests(text: &str) -> String {
    let mut rest = text;
    let mut kept = 0;
    while let Some(at) = rest.find("#[cfg(test)]") {
        let after = rest[at + "#[cfg(test)]".len()..].trim_start();
        if after.starts_with("mod ") && after.split(';').next().is_some_and(|decl| decl.contains('{')) {
            return text[..kept + at].to_owned();
        }
        kept += at + 1;
        rest = &rest[at + 1..];
    }
    text.to_owned()
}

/// The paths of the text's `use` trees, expanded, each with the name it binds; only those of
/// `pub use` (and `pub(crate) use`) when `exported`.
fn use_paths(text: &str, exported: bool) -> Vec<(Vec<String>, String)> {
    let code = without_comments(text);
    let mut paths = Vec::new();
    let mut offset = 0;
    for line in code.split_inclusive('\n') {
        let start = offset;
        offset += line.len();
        let trimmed = line.trim_start();
        let public = trimmed.starts_with("pub");
        let rest = if public { trimmed.trim_start_matches("pub").trim_start() } else { trimmed };
        let rest = if rest.starts_with('(') {
            rest.split_once(')').map_or("", |(_, r)| r).trim_start()
        } else {
            rest
        };
        if !rest.starts_with("use ") || (exported && !public) {
            continue;
        }
        let at = start + (line.len() - rest.len());
        let statement = &code[at + 4..code[at..].find(';').map_or(code.len(), |end| at + end)];
        let tree = statement.split_whitespace().collect::<Vec<_>>().join(" ");
        let tree = ["::", "{", "}", ","].iter().fold(tree, |tree, token| {
            tree.replace(&format!(" {token}"), token).replace(&format!("{token} "), token)
        });
        expand(&tree, &mut Vec::new(), &mut paths);
    }
    paths
}

fn expand(tree: &str, prefix: &mut Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
    let tree = tree.trim_start_matches("::");
    if let Some(open) = tree.find('{') {
        let head: Vec<String> =
            tree[..open].split("::").filter(|s| !s.is_empty()).map(str::to_owned).collect();
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let depth = prefix.len();
        prefix.extend(head);
        for part in split_top_level(inner) {
            expand(part, prefix, out);
        }
        prefix.truncate(depth);
        return;
    }
    let (path, alias) = match tree.split_once(" as ") {
        Some((path, alias)) => (path, Some(alias)),
        None => (tree, None),
    };
    let mut full = prefix.clone();
    full.extend(path.split("::").filter(|s| !s.is_empty() && *s != "*").map(str::to_owned));
    if full.last().is_some_and(|last| last == "self") {
        full.pop();
    }
    let name = alias.map(str::to_owned).or_else(|| full.last().cloned()).unwrap_or_default();
    out.push((full, name));
}

fn split_top_level(text: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts.into_iter().filter(|p| !p.is_empty()).collect()
}

/// `crate::a::b`, `super::x`, `self::y` paths written outside `use` statements.
fn inline_paths(text: &str) -> Vec<Vec<String>> {
    let code = without_comments(text);
    let mut paths = Vec::new();
    for start in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(at) = code[from..].find(start) {
            let at = from + at;
            from = at + start.len();
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let path: String =
                code[at..].chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect();
            paths.push(path.split("::").filter(|s| !s.is_empty()).map(str::to_owned).collect());
        }
    }
    paths
}

/// The text without `//` comments (doc comments name paths that are not imports).
fn without_comments(text: &str) -> String {
    text.lines().map(|line| line.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

/// `path` relative to the crate root, or None for a path into another crate.
fn absolute(module: &[String], path: &[String], modules: &Modules) -> Option<Vec<String>> {
    let mut base = module.to_vec();
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            base.clear();
            rest = &rest[1..];
        }
        Some("self") => rest = &rest[1..],
        Some("super") => {
            while rest.first().is_some_and(|s| s == "super") {
                base.pop()?;
                rest = &rest[1..];
            }
        }
        // A child module's name, in scope through `mod child;`.
        Some(first) if modules.contains_key(&[module, &[first.to_owned()]].concat()) => {}
        _ => return None,
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// The module that defines what `path` names: its longest module prefix, through re-exports.
fn resolve(
    path: &[String],
    modules: &Modules,
    re_exports: &BTreeMap<(Vec<String>, String), Vec<String>>,
) -> Option<Vec<String>> {
    let mut path = path.to_vec();
    for _ in 0..8 {
        let prefix_len = (0..=path.len()).rev().find(|&n| modules.contains_key(&path[..n]))?;
        let module = path[..prefix_len].to_vec();
        match path.get(prefix_len).and_then(|name| re_exports.get(&(module.clone(), name.clone()))) {
            Some(target) if *target != path[..=prefix_len] => {
                let mut next = target.clone();
                next.extend(path[prefix_len + 1..].iter().cloned());
                path = next;
            }
            _ => return Some(module),
        }
    }
    None
}

/// Tarjan's strongly connected components.
fn strongly_connected(graph: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<Vec<Vec<String>>> {
    struct State<'g> {
        graph: &'g BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        index: BTreeMap<&'g Vec<String>, usize>,
        low: BTreeMap<&'g Vec<String>, usize>,
        stack: Vec<&'g Vec<String>>,
        on_stack: BTreeSet<&'g Vec<String>>,
        sets: Vec<Vec<Vec<String>>>,
    }
    fn visit<'g>(state: &mut State<'g>, node: &'g Vec<String>) {
        let n = state.index.len();
        state.index.insert(node, n);
        state.low.insert(node, n);
        state.stack.push(node);
        state.on_stack.insert(node);
        for next in state.graph.get(node).into_iter().flatten() {
            let Some((next, _)) = state.graph.get_key_value(next) else { continue };
            if !state.index.contains_key(next) {
                visit(state, next);
                let low = state.low[node].min(state.low[next]);
                state.low.insert(node, low);
            } else if state.on_stack.contains(next) {
                let low = state.low[node].min(state.index[next]);
                state.low.insert(node, low);
            }
        }
        if state.low[node] == state.index[node] {
            let mut set = Vec::new();
            while let Some(top) = state.stack.pop() {
                state.on_stack.remove(top);
                set.push(top.clone());
                if top == node {
                    break;
                }
            }
            set.sort();
            state.sets.push(set);
        }
    }
    let mut state = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        sets: Vec::new(),
    };
    for node in graph.keys() {
        if !state.index.contains_key(node) {
            visit(&mut state, node);
        }
    }
    state.sets
}

fn display(src: &Path, graph: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>, module: &[String]) -> String {
    let mut modules = Modules::new();
    collect_modules(src, &[], &mut modules);
    let file = modules.get(module).map(|f| f.strip_prefix(src).unwrap_or(f).display().to_string());
    let targets: Vec<String> = graph[module].iter().map(|m| m.join("::")).collect();
    format!("{} (→ {})", file.unwrap_or_else(|| module.join("::")), targets.join(", "))
}
