//! The README's two set-up commands, `cargo test --workspace` and `cargo run -p logs-cli`,
//! build every dependency once between them: each dependency of `logs-cli` has the same
//! features whether `logs-cli` alone or the whole workspace (tests and benchmarks included)
//! is built. Cargo gives a dependency the union of the features that the selected packages
//! ask for, so a feature that only a test or a benchmark turns on (proptest's `getrandom/std`,
//! say) would otherwise make the second command build that crate and everything above it,
//! DataFusion included, again. The fix is in `crates/logs-cli/Cargo.toml`.
//!
//! The same holds for the benchmarks: a plain `cargo bench` selects every member (none is left
//! out of `default-members`), and `benches/peers/run`'s release build of `logs-cli`,
//! `logs-testkit` and `logs-benches` builds each dependency with the workspace's features, so
//! the two share one release build.

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

/// Asserts that each dependency of the packages `cargo tree <selection>` selects has the
/// features it has in the whole workspace; `problem` says what a difference would cost.
fn assert_built_as_in_the_workspace(selection: &[&str], problem: &str) {
    let workspace = features(&["--workspace"]);
    let selected = features(selection);
    assert!(selected.keys().any(|package| package.starts_with("datafusion ")), "{selected:?}");
    let differing: Vec<String> = selected
        .iter()
        .filter(|(package, features)| workspace.get(*package).is_some_and(|all| all != *features))
        .map(|(package, features)| {
            format!("{package}: {features:?} alone, {:?} in the workspace", workspace[package])
        })
        .collect();
    assert!(differing.is_empty(), "{problem}:\n{}", differing.join("\n"));
}

#[test]
fn the_cli_alone_builds_its_dependencies_as_the_workspace_does() {
    assert_built_as_in_the_workspace(
        &["--package", "logs-cli", "--edges", "normal,build"],
        "built twice by the README's two commands (add the features to crates/logs-cli/Cargo.toml)",
    );
}

#[test]
fn cargo_bench_and_the_peer_comparison_share_one_build() {
    // From the workspace's root, as a plain `cargo bench` runs (inside a member's folder, cargo
    // selects that member instead).
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(cargo)
        .current_dir(&root)
        .args(["metadata", "--locked", "--offline", "--no-deps", "--format-version", "1"])
        .output()
        .unwrap();
    assert!(output.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&output.stderr));
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let ids = |key: &str| -> BTreeSet<String> {
        let list = metadata[key].as_array().unwrap_or_else(|| panic!("no {key} in cargo metadata"));
        list.iter().map(|id| id.as_str().unwrap().to_owned()).collect()
    };
    let members = ids("workspace_members");
    assert!(members.iter().any(|id| id.contains("logs-benches")), "{members:?}");
    assert_eq!(ids("workspace_default_members"), members, "a plain `cargo bench` would leave members out");

    assert_built_as_in_the_workspace(
        &[
            "--package",
            "logs-cli",
            "--package",
            "logs-testkit",
            "--package",
            "logs-benches",
            "--edges",
            "normal,build",
        ],
        "benches/peers/run's build and `cargo bench` would build these twice",
    );
}
