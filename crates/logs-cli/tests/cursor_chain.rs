//! Cursor chains end to end (issue 42), over real HTTP against `logs serve` processes, with
//! DuckDB reading the final Parquet files as the oracle:
//!
//! - over a folder, a chain called again and again while a writer process adds files to old
//!   and new date folders (calls between its writes and during them) delivers, once the
//!   writer has stopped and the settle time has passed, every record exactly once;
//! - the same over a bucket (moto), consecutive calls alternating between two replicas that
//!   share the key file, one of them reading the bucket through a proxy that fails some calls;
//! - a damaged, truncated or forged cursor, one of another application, fields, filters or
//!   date dimension, and one signed by a key the server no longer holds: 400 naming `cursor`;
//!   `limit`, parts, `date_until` and `skip_unavailable_shards` with a cursor: 400;
//! - keys rotate ("NEW\nOLD", then "NEW") without breaking a chain;
//! - a delivered object deleted or replaced, or one copied in with an old modification time:
//!   409 `cursor_conflict` naming the date folder;
//! - an export cut mid-body and retried with the old cursor, and the same cursor used twice:
//!   the same records, and the chain stays exact;
//! - an object written in place across calls is delivered once complete and settled; one whose
//!   write stalls for longer than the settle time fails the call (503), never skipped;
//! - a chain of prepared exports (`Prefer: respond-async`) stays exact.
//!
//! The writer (`logs_testkit::writer`, the `dataset-writer` binary's code) runs in a child
//! process: this test binary again, running only `dataset_writer_child`.

mod common;
#[path = "cursor_chain/support.rs"]
mod support;

use std::ffi::OsStr;
use std::io::Write;
use std::process::Stdio;
use std::time::{Duration, Instant};

use logs_testkit::proxy::{FaultProxy, Mode};
use logs_testkit::s3::S3Server;
use support::*;

/// The writer's process (see `support::Writer`).
#[test]
#[ignore = "runs only as the writer process of the chain tests"]
fn dataset_writer_child() {
    run_writer_child();
}

/// A pause of 0 to 90 ms between calls, varied by the call's number.
fn pause(call: usize) -> Duration {
    Duration::from_millis((call as u64 * 37) % 100)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_over_a_folder_delivers_every_record_once_while_a_writer_adds_files() {
    let ChainFolder { dir: _folder, root, keys } = ChainFolder::new(1500, 1);
    let staging = staging();
    let served = serve_chain(root.as_os_str(), &keys, "1s", &[]);
    let mut chain = Chain::new();

    let mut writer = Writer::spawn(staging.path(), &root.display().to_string(), 20, 11, &[]);
    let (mut during, mut between) = (0, 0);
    let started = Instant::now();
    while writer.running() {
        let call = Instant::now();
        chain.call(&served).await;
        match writer.added_between(call, Instant::now()) {
            0 => between += 1,
            _ => during += 1,
        }
        tokio::time::sleep(pause(chain.calls)).await;
    }
    let added = writer.finish();
    let writing = started.elapsed();
    assert_eq!(added.len(), 60);
    // Every object is older than the settle time (1 s) now: the last call gets the rest.
    tokio::time::sleep(Duration::from_secs(2)).await;
    chain.call(&served).await;
    let expected = expected_records(&root);
    assert!(expected.len() > 1000, "{} records", expected.len());
    assert_same_records(&chain.records, &expected, "the chain's union against DuckDB over the folder");
    // Nothing is delivered twice: a call now finds nothing new.
    assert!(chain.call(&served).await.is_empty());
    assert!(during > 0 && between > 0, "{during} calls during writes, {between} between them");
    println!(
        "{} calls ({during} during writes, {between} between) over {writing:?} of writing; {} records",
        chain.calls,
        expected.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_over_a_bucket_alternating_two_replicas_delivers_every_record_once() {
    let s3 = S3Server::start();
    s3.create_bucket("logs");
    let env = s3.env();
    let data = OsStr::new("s3://logs/data");
    generate(data, 1500, first_day(), 1, &env);
    let staging = staging();
    let folder = tempfile::tempdir().unwrap();
    let keys = folder.path().join("keys");
    write_keys(&keys, &[OLD_KEY]);
    // Replica B reads the bucket through a proxy that fails some of its calls.
    let proxy = FaultProxy::start(s3.addr(), Mode::Pass);
    let mut proxied = env.clone();
    proxied.retain(|(k, _)| *k != "AWS_ENDPOINT_URL");
    proxied.push(("AWS_ENDPOINT_URL", proxy.endpoint()));
    // moto's modification times are whole seconds, up to 1 s before the write: the settle
    // time must be longer than that and the upload together (see the report of issue 42).
    let replicas = [serve_chain(data, &keys, "3s", &env), serve_chain(data, &keys, "3s", &proxied)];
    let mut chain = Chain::new();

    let mut writer = Writer::spawn(staging.path(), "s3://logs/data", 20, 12, &env);
    let (mut during, mut failed) = (0, 0);
    while writer.running() {
        let call = Instant::now();
        let replica = &replicas[chain.calls % 2];
        if chain.calls % 6 == 1 {
            // The store fails for B: the call fails before its first byte, and the same
            // cursor goes on once the store is back.
            proxy.set_mode(Mode::Status(503));
            let refused = chain.get(replica, &chain.target(&chain.cursor, "")).await;
            assert_eq!(refused.status(), 503, "{}", refused.text().await.unwrap());
            proxy.set_mode(Mode::Pass);
            failed += 1;
        }
        chain.call(replica).await;
        during += usize::from(writer.added_between(call, Instant::now()) > 0);
        tokio::time::sleep(pause(chain.calls)).await;
    }
    let added = writer.finish();
    assert_eq!(added.len(), 60);
    tokio::time::sleep(Duration::from_secs(4)).await;
    chain.call(&replicas[chain.calls % 2]).await;

    // The oracle: the bucket as it stands, downloaded, read by DuckDB.
    let download = folder.path().join("download");
    s3.download_folder("logs", "data", &download);
    for key in &added {
        assert!(download.join(key).exists(), "{key} is not in the bucket");
    }
    let expected = expected_records(&download);
    assert!(expected.len() > 1000, "{} records", expected.len());
    assert_same_records(&chain.records, &expected, "the chain's union against DuckDB over the bucket");
    assert!(
        chain.call(&replicas[chain.calls % 2]).await.is_empty(),
        "a call after the last finds nothing new"
    );
    assert!(during > 0 && failed > 0, "{during} calls during writes, {failed} failed");
    println!("{} calls over two replicas ({during} during writes, {failed} failed and retried)", chain.calls);

    // An object the chain delivered, deleted from the bucket: a conflict on either replica.
    let in_chain = format!("application_id={APP}/date={}", since());
    let key =
        added.iter().find(|k| k.starts_with(&format!("application_id={APP}/")) && **k >= in_chain).unwrap();
    s3.delete_object("logs", &format!("data/{key}"));
    let date = key.split("date=").nth(1).unwrap().split('/').next().unwrap();
    for replica in &replicas {
        let (status, error_type, _, message) =
            refusal(chain.get(replica, &chain.target(&chain.cursor, "")).await).await;
        assert_eq!((status, error_type.as_str()), (409, "cursor_conflict"), "{message}");
        assert!(message.contains(&format!("cursor=start&date_since={date}")), "{message}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_forged_and_foreign_cursors_are_refused_naming_the_parameter() {
    let ChainFolder { dir: folder, root, keys } = ChainFolder::new(600, 2);
    let served = serve_chain(root.as_os_str(), &keys, "1s", &[]);
    let chain = Chain::new();
    let (_, cursor) = chain.call_with(&served, "start").await;
    let refused = |target: String| {
        let (chain, served) = (&chain, &served);
        async move { refusal(chain.get(served, &target).await).await }
    };

    let flip = |at: usize| {
        let mut bytes = cursor.clone().into_bytes();
        bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
        String::from_utf8(bytes).unwrap()
    };
    let with = |cursor: &str, more: &str| chain.target(cursor, more);
    let other_fields = FIELDS.replacen("error_id,error_datetime", "error_datetime,error_id", 1);
    let cases = [
        ("a byte of application_id flipped", with(&flip(8), "")),
        ("a byte in the middle flipped", with(&flip(cursor.len() / 2), "")),
        ("the last byte flipped", with(&flip(cursor.len() - 1), "")),
        ("cut short", with(&cursor[..cursor.len() - 3], "")),
        ("cut to 20 characters", with(&cursor[..20], "")),
        ("not base64", with(&format!("{}!", &cursor[1..]), "")),
        ("another application", with(&cursor, "").replacen("application_id=1001", "application_id=1002", 1)),
        ("other fields", with(&cursor, "").replacen(FIELDS, &other_fields, 1)),
        ("a filter", with(&cursor, "&os_name=ios")),
        ("another date dimension", with(&cursor, "&date_dimension=receive")),
    ];
    for (what, target) in cases {
        let (status, error_type, location, message) = refused(target).await;
        let got = (status, error_type.as_str(), location.as_str());
        assert_eq!(got, (400, "invalid_parameter", "cursor"), "{what}: {message}");
    }
    // A chain with a filter is bound to it: without the filter, refused.
    let filtered = chain.get(&served, &with("start", "&os_name=ios")).await;
    let filtered = filtered.headers()["logs-cursor"].to_str().unwrap().to_owned();
    let (status, _, location, message) = refused(with(&filtered, "")).await;
    assert_eq!((status, location.as_str()), (400, "cursor"), "{message}");
    assert!(message.contains("other filters"), "{message}");

    // What a chain's call cannot take: 400 naming the parameter, saying why (`cursor`).
    for start_or_continue in ["start", cursor.as_str()] {
        for (parameter, more) in [
            ("limit", "&limit=10"),
            ("parts_count", "&parts_count=2&part_number=1"),
            ("date_until", "&date_until=2099-01-01"),
            ("skip_unavailable_shards", "&skip_unavailable_shards=true"),
        ] {
            let (status, _, location, message) = refused(with(start_or_continue, more)).await;
            assert_eq!((status, location.as_str()), (400, parameter), "{more}: {message}");
            assert!(message.contains("`cursor`"), "{message}");
        }
    }
    let other_since =
        format!("errors.csv?application_id={APP}&fields={FIELDS}&date_since=2026-01-01&cursor={cursor}");
    let (status, _, location, _) = refused(other_since).await;
    assert_eq!((status, location.as_str()), (400, "date_since"), "another date_since");
    let no_since = format!("errors.csv?application_id={APP}&fields={FIELDS}&cursor=start");
    let (status, _, location, _) = refused(no_since).await;
    assert_eq!((status, location.as_str()), (400, "date_since"), "cursor=start without date_since");

    // Another server, another key: the cursor is not its own.
    let other_keys = folder.path().join("other-keys");
    write_keys(&other_keys, &[NEW_KEY]);
    let other = serve_chain(root.as_os_str(), &other_keys, "1s", &[]);
    let (status, _, location, message) = refusal(chain.get(&other, &with(&cursor, "")).await).await;
    assert_eq!((status, location.as_str()), (400, "cursor"), "{message}");
    assert!(message.contains("no longer holds"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_rotate_without_breaking_a_chain() {
    let folder = tempfile::tempdir().unwrap();
    let root = folder.path().join("data");
    generate(root.as_os_str(), 600, first_day(), 3, &[]);
    let staging = staging();
    let keys = folder.path().join("keys");
    let add_files = |seed| Writer::spawn(staging.path(), &root.display().to_string(), 1, seed, &[]).finish();
    let settled = || tokio::time::sleep(Duration::from_secs(2));

    write_keys(&keys, &[OLD_KEY]);
    let served = serve_chain(root.as_os_str(), &keys, "1s", &[]);
    let mut chain = Chain::new();
    chain.call(&served).await;
    let old_signed = chain.cursor.clone();
    drop(served);
    add_files(31);
    settled().await;

    // The new key added everywhere, first: the old cursor is accepted, and the next one is
    // signed with the new key.
    write_keys(&keys, &[NEW_KEY, OLD_KEY]);
    let served = serve_chain(root.as_os_str(), &keys, "1s", &[]);
    assert!(!chain.call(&served).await.is_empty(), "the files added since");
    drop(served);
    add_files(32);
    settled().await;

    // The old key dropped: the new cursor goes on, the old is refused.
    write_keys(&keys, &[NEW_KEY]);
    let served = serve_chain(root.as_os_str(), &keys, "1s", &[]);
    let (status, _, location, message) =
        refusal(chain.get(&served, &chain.target(&old_signed, "")).await).await;
    assert_eq!((status, location.as_str()), (400, "cursor"), "{message}");
    assert!(message.contains("no longer holds"), "{message}");
    assert!(!chain.call(&served).await.is_empty(), "the files added since");
    assert_same_records(&chain.records, &expected_records(&root), "the chain across two key rotations");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivered_object_deleted_or_replaced_is_a_conflict_naming_its_date() {
    let ChainFolder { dir: _folder, root, keys } = ChainFolder::new(900, 4);
    let served = serve_chain(root.as_os_str(), &keys, "1s", &[]);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let chain = Chain::new();
    let conflict = |cursor: String, file: std::path::PathBuf| {
        let (chain, served) = (&chain, &served);
        async move {
            let folder = file.parent().unwrap().file_name().unwrap().to_string_lossy().into_owned();
            let date = folder.trim_start_matches("date=");
            let target = chain.target(&cursor, "");
            let (status, error_type, location, message) = refusal(chain.get(served, &target).await).await;
            let got = (status, error_type.as_str(), location.as_str());
            assert_eq!(got, (409, "cursor_conflict", "cursor"), "{message}");
            assert!(message.contains(&format!("date folder {date}")), "{message}");
            assert!(message.contains(&format!("cursor=start&date_since={date}")), "{message}");
            println!("{message}");
        }
    };

    // Deleted (retention, compaction).
    let (_, cursor) = chain.call_with(&served, "start").await;
    let deleted = delivered_file(&root, 0);
    std::fs::remove_file(&deleted).unwrap();
    conflict(cursor, deleted).await;

    // Replaced: rewritten in place with other records (a fresh modification time).
    let (_, cursor) = chain.call_with(&served, "start").await;
    let replaced = delivered_file(&root, 5);
    std::fs::write(&replaced, std::fs::read(delivered_file(&root, 6)).unwrap()).unwrap();
    conflict(cursor, replaced).await;

    // Copied in keeping its old modification time (`cp -p`): behind the cursor.
    let (_, cursor) = chain.call_with(&served, "start").await;
    let source = delivered_file(&root, 9);
    let copy = source.with_file_name("copied-with-its-time.parquet");
    std::fs::copy(&source, &copy).unwrap();
    let old = std::fs::metadata(&source).unwrap().modified().unwrap();
    std::fs::File::options().write(true).open(&copy).unwrap().set_modified(old).unwrap();
    conflict(cursor, copy).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_cut_mid_body_and_retried_with_the_old_cursor_keeps_the_chain_exact() {
    let ChainFolder { dir: _folder, root, keys } = ChainFolder::new(3000, 5);
    let staging = staging();
    let served = serve_chain(root.as_os_str(), &keys, "1s", &[]);
    let add_files = |seed| Writer::spawn(staging.path(), &root.display().to_string(), 2, seed, &[]).finish();
    let settled = || tokio::time::sleep(Duration::from_secs(2));
    settled().await;
    let mut chain = Chain::new();

    // The first call's transfer is cut after its first chunk: the client drops it.
    let whole = chain.get(&served, &chain.target("start", "")).await.bytes().await.unwrap();
    let mut cut = chain.get(&served, &chain.target("start", "")).await;
    assert_eq!(cut.status(), 200);
    let first = cut.chunk().await.unwrap().expect("a first chunk");
    drop(cut);
    assert!(first.len() < whole.len(), "the first chunk is the whole body ({} bytes)", whole.len());
    // Files become visible before the retry with the old cursor: it delivers the cut call's
    // records and those.
    add_files(41);
    settled().await;
    let retried = chain.call(&served).await;
    let partial = records(&first[..first.iter().rposition(|&b| b == b'\n').unwrap() + 1]);
    assert!(!partial.is_empty());
    let mut left = retried.clone();
    for record in &partial {
        let at = left.iter().position(|r| r == record);
        left.swap_remove(at.unwrap_or_else(|| panic!("{record:?} of the cut transfer not delivered again")));
    }
    assert!(left.len() > records(&whole).len() - partial.len(), "the files added before the retry");

    // The same cursor twice, nothing written between: the same records. The next cursors may
    // differ (each holds its call's time), and both go on alike.
    add_files(42);
    settled().await;
    let (twice, other_next) = chain.call_with(&served, &chain.cursor).await;
    let once = chain.call(&served).await;
    assert!(!once.is_empty());
    assert_same_records(&twice, &once, "two calls with the same cursor");
    add_files(43);
    settled().await;
    let (from_other, _) = chain.call_with(&served, &other_next).await;
    let from_chain = chain.call(&served).await;
    assert!(!from_chain.is_empty());
    assert_same_records(&from_other, &from_chain, "the calls after the two calls with the same cursor");
    assert_same_records(&chain.records, &expected_records(&root), "the chain after a cut transfer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_written_in_place_across_calls_is_delivered_once_complete_and_settled() {
    let ChainFolder { dir: _folder, root, keys } = ChainFolder::new(600, 6);
    let staging = staging();
    let served = serve_chain(root.as_os_str(), &keys, "1s", &[]);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut chain = Chain::new();
    chain.call(&served).await;

    // A writer writes an object under its final name, in two halves (no rename).
    let staged = delivered_file(staging.path(), 3);
    let bytes = std::fs::read(&staged).unwrap();
    let relative = staged.strip_prefix(staging.path()).unwrap();
    let path = root.join(relative.with_file_name("in-place.parquet"));
    let mut file = std::fs::File::create(&path).unwrap();
    file.write_all(&bytes[..bytes.len() / 2]).unwrap();
    // Half written, its modification time within the settle time: neither read nor delivered.
    assert!(chain.call(&served).await.is_empty());
    file.write_all(&bytes[bytes.len() / 2..]).unwrap();
    drop(file);
    // Complete but not settled: not yet.
    assert!(chain.call(&served).await.is_empty());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let delivered = chain.call(&served).await;
    assert!(!delivered.is_empty());
    assert_same_records(&chain.records, &expected_records(&root), "an object written in place");

    // A write that stops for longer than the settle time breaks the dataset's promise: the
    // half object is read, and the call fails (never a silent skip); once the object is
    // complete, the same cursor goes on.
    let path = path.with_file_name("stalled.parquet");
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let failed = chain.get(&served, &chain.target(&chain.cursor, "")).await;
    let status = failed.status();
    let body = failed.text().await.unwrap();
    println!("{status}: {body}");
    assert!(status.is_server_error(), "{status}: {body}");
    std::fs::write(&path, &bytes).unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(chain.call(&served).await.len(), delivered.len(), "the same object's records");
    assert_same_records(&chain.records, &expected_records(&root), "the chain after a stalled write");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_of_prepared_exports_stays_exact_while_files_are_added() {
    let ChainFolder { dir: folder, root, keys } = ChainFolder::new(900, 7);
    let staging = staging();
    let spool = folder.path().join("spool");
    let (keys_flag, spool_flag) = (keys.display().to_string(), spool.display().to_string());
    let flags = ["--cursor-key-file", &keys_flag, "--cursor-settle", "1s", "--spool", &spool_flag];
    let served =
        common::serve_with(&root, &[&flags[..], &common::PREPARE_ALWAYS_AT_ONCE].concat(), Stdio::null());
    let mut chain = Chain::new();
    let client = reqwest::Client::builder().timeout(Duration::from_secs(120)).build().unwrap();
    for seed in 51..55 {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let url = format!("{}/logs/v1/export/{}", served.base, chain.target(&chain.cursor, ""));
        let done = common::until_done(&client, &url, &served.token).await;
        assert_eq!(done.status(), 200);
        let next = done.headers().get("logs-cursor").expect("a prepared chain's call carries Logs-Cursor");
        let next = next.to_str().unwrap().to_owned();
        chain.keep(&records(&done.bytes().await.unwrap()), next);
        Writer::spawn(staging.path(), &root.display().to_string(), 1, seed, &[]).finish();
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let url = format!("{}/logs/v1/export/{}", served.base, chain.target(&chain.cursor, ""));
    let done = common::until_done(&client, &url, &served.token).await;
    assert_eq!(done.status(), 200);
    chain.records.extend(records(&done.bytes().await.unwrap()));
    assert_same_records(&chain.records, &expected_records(&root), "a chain of prepared exports");
}
