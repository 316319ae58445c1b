//! The tokens file is reloaded while the server runs; a broken file keeps the previous set.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use http::StatusCode;
use logs_core::EngineConfig;
use logs_server::auth::tokens_file::Reload;
use logs_server::auth::{Authenticator, TokenStore};
use logs_server::{AppState, ServeOptions, Settings};

const FIRST: &str = "tok-first-aaaaaaaaaaaaaaaa";
const SECOND: &str = "tok-second-bbbbbbbbbbbbbbbb";
const BOTH: &str = "tok-both-cccccccccccccccccc";

fn file_with(path: &Path, tokens: &[(&str, &str)]) {
    let mut text = String::new();
    for (name, token) in tokens {
        text.push_str(&format!(
            "[[tokens]]\nname = \"{name}\"\nsha256 = \"{}\"\nscopes = [\"service:read\"]\n\n",
            sha256_hex(token)
        ));
    }
    // Write beside and rename, as deployment tools do; the watcher reads content, not mtime.
    let temporary = path.with_extension("tmp");
    std::fs::write(&temporary, text).unwrap();
    std::fs::rename(&temporary, path).unwrap();
}

async fn app_with(store: Arc<TokenStore>) -> (axum::Router, AppState) {
    let engine = engine(small_dataset(), EngineConfig::default());
    let state =
        AppState::new(engine, Authenticator::new(Some(store), None), Settings::default()).await.unwrap();
    (logs_server::app(state.clone()), state)
}

async fn status(app: &axum::Router, token: &str) -> StatusCode {
    get(app, "/management/v1/applications", Some(token)).await.0
}

#[tokio::test]
async fn explicit_reloads_as_on_sighup() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokens.toml");
    file_with(&path, &[("first", FIRST)]);
    let store = Arc::new(TokenStore::open(&path).unwrap());
    let (app, _) = app_with(store.clone()).await;
    assert_eq!(status(&app, FIRST).await, StatusCode::OK);
    assert_eq!(status(&app, SECOND).await, StatusCode::UNAUTHORIZED);

    assert_eq!(store.reload(false), Reload::Unchanged);
    file_with(&path, &[("second", SECOND)]);
    assert_eq!(store.reload(false), Reload::Reloaded { tokens: 1 });
    assert_eq!(status(&app, FIRST).await, StatusCode::UNAUTHORIZED);
    assert_eq!(status(&app, SECOND).await, StatusCode::OK);
    // SIGHUP reloads even an unchanged file.
    assert_eq!(store.reload(true), Reload::Reloaded { tokens: 1 });

    // Broken: the previous set stays, and the reason never quotes the file's values.
    std::fs::write(&path, format!("[[tokens]]\nname = \"x\"\ntoken = \"{FIRST} with spaces\"\nscopes = []"))
        .unwrap();
    match store.reload(false) {
        Reload::Failed(reason) => assert!(!reason.contains(FIRST) && reason.contains("token"), "{reason}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(status(&app, SECOND).await, StatusCode::OK);
    assert_eq!(status(&app, FIRST).await, StatusCode::UNAUTHORIZED);
    // A vanished file too.
    std::fs::remove_file(&path).unwrap();
    assert!(matches!(store.reload(false), Reload::Failed(_)));
    assert_eq!(status(&app, SECOND).await, StatusCode::OK);
    assert_eq!(store.reload_counts(), (2, 2));
}

#[tokio::test]
async fn an_invalid_file_at_start_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokens.toml");
    std::fs::write(&path, "[[tokens]]\nname = \"x\"\nsha256 = \"abc\"\nscopes = []").unwrap();
    let e = TokenStore::open(&path).unwrap_err().to_string();
    assert!(e.contains("64 hexadecimal") && !e.contains("abc"), "{e}");
    assert!(TokenStore::open(dir.path().join("missing.toml")).is_err());
}

#[tokio::test]
async fn the_watcher_picks_up_changes_without_dropping_requests() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokens.toml");
    file_with(&path, &[("first", FIRST), ("both", BOTH)]);
    let store = Arc::new(TokenStore::open(&path).unwrap());
    let watcher = store.spawn_watcher(Duration::from_millis(50));
    let (_, state) = app_with(store.clone()).await;
    let server = TestServer::start(state.clone(), ServeOptions::for_settings(state.settings())).await;
    let client = client();

    // A token in every version of the file is served throughout the reloads.
    let url = server.url("/management/v1/applications");
    let steady = {
        let client = client.clone();
        let url = url.clone();
        tokio::spawn(async move {
            let mut answered = 0;
            for _ in 0..200 {
                let response =
                    client.get(&url).header("Authorization", format!("OAuth {BOTH}")).send().await.unwrap();
                assert_eq!(response.status(), StatusCode::OK);
                answered += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            answered
        })
    };
    let ask = |token: &'static str| {
        let request = client.get(&url).header("Authorization", format!("OAuth {token}"));
        async move { request.send().await.unwrap().status() }
    };
    assert_eq!(ask(FIRST).await, StatusCode::OK);
    file_with(&path, &[("second", SECOND), ("both", BOTH)]);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while ask(SECOND).await != StatusCode::OK {
        assert!(std::time::Instant::now() < deadline, "the new file was not picked up");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(ask(FIRST).await, StatusCode::UNAUTHORIZED);

    std::fs::write(&path, "this is not TOML [").unwrap();
    eventually("the broken file is noticed", || store.reload_counts().1 >= 1).await;
    assert_eq!(ask(SECOND).await, StatusCode::OK, "the previous set stays");
    file_with(&path, &[("first", FIRST), ("both", BOTH)]);
    eventually("the repaired file is used", || store.reload_counts().0 >= 2).await;
    assert_eq!(ask(FIRST).await, StatusCode::OK);
    assert_eq!(steady.await.unwrap(), 200);

    watcher.abort();
    server.stop().await;
}
