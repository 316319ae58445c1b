//! The README's two set-up commands, `cargo test --workspace` and `cargo run -p logs-cli`,
//! build every dependency once between them: each dependency of `logs-cli` has the same
//! features whether `logs-cli` alone or the whole workspace (tests and benchmarks included)
//! is built. Cargo gives a dependency the union of the features that the selected packages
//! ask for, so a feature that only a test or a benchmark turns on (proptest's `getrandom/std`,
//! say) would otherwise make the second command build that crate and everything above it,
//! DataFusion included, again. The fix is in `crates/logs-cli/Cargo.toml`.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// Each package of `cargo tree <args>` with the feature sets it is built with.
fn features(args: &[&str]) -> BTreeMap<String, BTreeSet<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(cargo)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["tree", "--locked", "--offline", "--prefix", "none", "--format", "{p}|{f}"])
        .args(args)
        .output()
        .unwrap();
    assert!(output.status.success(), "cargo tree {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    let mut packages: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in String::from_utf8(output.stdout).unwrap().lines() {
        let line = line.trim_end_matches(" (*)");
        if let Some((package, features)) = line.split_once('|') {
            packages.entry(package.trim().to_owned()).or_default().insert(features.to_owned());
        }
    }
    packages
}

#[test]
fn the_cli_alone_builds_its_dependencies_as_the_workspace_does() {
    let workspace = features(&["--workspace"]);
    let cli = features(&["--package", "logs-cli", "--edges", "normal,build"]);
    assert!(cli.keys().any(|package| package.starts_with("datafusion ")), "{cli:?}");
    let differing: Vec<String> = cli
        .iter()
        .filter(|(package, features)| workspace.get(*package).is_some_and(|all| all != *features))
        .map(|(package, features)| {
            format!("{package}: {features:?} alone, {:?} in the workspace", workspace[package])
        })
        .collect();
    assert!(
        differing.is_empty(),
        "built twice by the README's two commands (add the features to crates/logs-cli/Cargo.toml):\n{}",
        differing.join("\n")
    );
}
