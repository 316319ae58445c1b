//! `logs serve` with prepared exports: killed in the middle of a job, then started again on the
//! same spool, it serves the export that was complete before the crash and prepares again the
//! one that was not — never serving a part of it; with its spool in a bucket (moto on
//! loopback), it serves ranges and the gzip copy from there, also after a restart.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

mod common;

use common::*;
use logs_testkit::file_names;
use logs_testkit::s3::S3Server;

/// 60 000 records on one day: the CSV of `error_id,error` of application 1001 is over 10 MB,
/// so that a job lasts long enough to be cut.
fn one_large_day() -> tempfile::TempDir {
    generated(60_000, 1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_in_the_middle_of_a_job_serves_every_complete_export_and_no_incomplete_one() {
    let data = one_large_day();
    let spool = tempfile::tempdir().unwrap();
    let spool_arg = spool.path().display().to_string();
    // Renewed every 2 s: a renewal late by seconds on a loaded machine does not lose it.
    let lease = ["--spool", &spool_arg, "--spool-lease-ttl", "6s"];
    let flags = [&PREPARE_ALWAYS_AT_ONCE[..], &lease].concat();
    logs_server::install_tls_provider();
    let client = reqwest::Client::builder().timeout(Duration::from_secs(120)).build().unwrap();

    let small = "errors.csv?application_id=1001&date_since=2026-10-01&date_until=2026-10-01&fields=error_id,os_name&limit=100";
    let large =
        "errors.csv?application_id=1001&date_since=2026-10-01&date_until=2026-10-01&fields=error_id,error";
    let served = serve_with(data.path(), &flags, std::process::Stdio::null());
    let url = |served: &Served, target: &str| format!("{}/logs/v1/export/{target}", served.base);

    let done = until_done(&client, &url(&served, small), &served.token).await;
    assert_eq!(done.status(), 200);
    let etag = done.headers()["etag"].clone();
    let small_body = done.bytes().await.unwrap();
    // The export is served from its manifest, written just before the job gives its lease up.
    let deadline = Instant::now() + Duration::from_secs(30);
    while file_names(spool.path()).iter().any(|name| name.ends_with(".lease")) {
        assert!(Instant::now() < deadline, "a lease stayed: {:?}", file_names(spool.path()));
        std::thread::sleep(Duration::from_millis(20));
    }
    let complete = file_names(spool.path());
    assert_eq!(complete.len(), 3, "{complete:?}");

    // The large export's job starts; the process is killed once its copies are being written.
    let first = client.get(url(&served, large)).header("Authorization", format!("OAuth {}", served.token));
    assert_eq!(first.send().await.unwrap().status(), 202);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !file_names(spool.path()).iter().any(|name| name.contains('#')) {
        assert!(Instant::now() < deadline, "the job wrote nothing: {:?}", file_names(spool.path()));
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = served.child.id().to_string();
    assert!(Command::new("kill").args(["-KILL", &pid]).status().unwrap().success());
    drop(served);
    let left = file_names(spool.path());
    assert!(left.iter().any(|name| name.contains('#')), "the crash left the unfinished write: {left:?}");
    assert!(!left.iter().any(|name| name.ends_with(".manifest.json") && !complete.contains(name)));

    // Started again: the complete export is served at once; the unfinished write is deleted
    // once the dead job's lease has expired (6 s here), and the export is prepared anew.
    let served = serve_with(data.path(), &flags, std::process::Stdio::null());
    let again = client.get(url(&served, small)).header("Authorization", format!("OAuth {}", served.token));
    let again = again.send().await.unwrap();
    assert_eq!(again.status(), 200);
    assert_eq!(again.headers()["etag"], etag);
    assert_eq!(again.bytes().await.unwrap(), small_body);
    // The large export is prepared from the start, and is then exactly what `logs export` writes.
    let restart = client.get(url(&served, large)).header("Authorization", format!("OAuth {}", served.token));
    assert_eq!(restart.send().await.unwrap().status(), 202);
    let dead_job: Vec<String> = left.iter().filter(|name| name.contains('#')).cloned().collect();
    // If the new job took the expired lease over before a sweep saw it expired, the dead job's
    // write goes with the first sweep after the new job ends.
    let deadline = Instant::now() + Duration::from_secs(180);
    while file_names(spool.path()).iter().any(|name| dead_job.contains(name)) {
        assert!(Instant::now() < deadline, "the dead job's write stayed: {:?}", file_names(spool.path()));
        std::thread::sleep(Duration::from_millis(50));
    }
    let done = until_done(&client, &url(&served, large), &served.token).await;
    assert_eq!(done.status(), 200);
    let body = done.bytes().await.unwrap();
    let expected = export(data.path(), large);
    assert!(body.len() > 10_000_000, "{}", body.len());
    assert!(body == expected, "{} bytes prepared, {} from logs export", body.len(), expected.len());
}

/// `logs serve`'s flags for a spool in moto's bucket `spool`, every export prepared and every
/// first request answered 202 at once: the jobs and leases are what these tests look at.
fn bucket_spool() -> Vec<&'static str> {
    [&["--spool", "s3://spool/prepared"][..], &PREPARE_ALWAYS_AT_ONCE].concat()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spool_in_a_bucket_serves_ranges_and_the_gzip_copy_also_after_a_restart() {
    let s3 = S3Server::start();
    s3.create_bucket("spool");
    let env = s3.env();
    let data = testdata();
    let flags = bucket_spool();
    logs_server::install_tls_provider();
    let client = reqwest::Client::builder().timeout(Duration::from_secs(120)).build().unwrap();
    let target = "errors.csv?application_id=1001&date_since=2026-10-01&date_until=2026-10-14&fields=error_id,error,os_name";
    let expected = export(&data, target);

    let served = serve_env(data.as_os_str(), &flags, std::process::Stdio::null(), &env);
    let url = format!("{}/logs/v1/export/{target}", served.base);
    let done = until_done(&client, &url, &served.token).await;
    assert_eq!(done.status(), 200);
    let etag = done.headers()["etag"].clone();
    assert!(done.bytes().await.unwrap() == expected);
    let auth = format!("OAuth {}", served.token);
    let tail =
        client.get(&url).header("Authorization", &auth).header("Range", "bytes=1000-").send().await.unwrap();
    assert_eq!(tail.status(), 206);
    assert!(tail.bytes().await.unwrap() == expected[1000..]);
    drop(served);

    // Started again: the export is in the bucket, complete, and served at once.
    let served = serve_env(data.as_os_str(), &flags, std::process::Stdio::null(), &env);
    let url = format!("{}/logs/v1/export/{target}", served.base);
    let auth = format!("OAuth {}", served.token);
    let again = client.get(&url).header("Authorization", &auth).send().await.unwrap();
    assert_eq!(again.status(), 200);
    assert_eq!(again.headers()["etag"], etag);
    assert!(again.bytes().await.unwrap() == expected);
    assert!(get_gunzipped(&client, &url, &served.token).await == expected);
}

/// An export larger than the spool's upload parts (8 MiB) goes to the bucket in parts that S3
/// takes (every part but the last at least 5 MiB, which moto checks as S3 does) and is served
/// whole; a job that fails after its upload began aborts it, leaving no upload behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spool_in_a_bucket_takes_an_export_in_parts_and_a_failed_job_leaves_no_upload() {
    let data = one_large_day();
    let s3 = S3Server::start();
    s3.create_bucket("spool");
    let large =
        "errors.csv?application_id=1001&date_since=2026-10-01&date_until=2026-10-01&fields=error_id,error";
    let expected = export(data.path(), large);
    assert!(expected.len() > 10_000_000, "{}", expected.len());
    // The same rows with more fields: past the largest export allowed, which `large` is.
    let larger = format!("{large},error_name,device_model,os_version");
    assert!(export(data.path(), &larger).len() > expected.len());
    let max = expected.len().to_string();
    let flags = [&bucket_spool()[..], &["--prepared-max-size", &max]].concat();
    logs_server::install_tls_provider();
    let client = reqwest::Client::builder().timeout(Duration::from_secs(120)).build().unwrap();
    let served = serve_env(data.path().as_os_str(), &flags, std::process::Stdio::null(), &s3.env());
    let url = |target: &str| format!("{}/logs/v1/export/{target}", served.base);

    let done = until_done(&client, &url(large), &served.token).await;
    assert_eq!(done.status(), 200);
    assert!(done.bytes().await.unwrap() == expected);

    // The larger export fails once its upload has begun (past 8 MiB): the upload is aborted.
    let failed = until_done(&client, &url(&larger), &served.token).await;
    assert_eq!(failed.status(), 400);
    assert_eq!(s3.multipart_uploads("spool"), Vec::<String>::new());
    let copies: Vec<String> =
        bucket_keys(&s3).into_iter().filter(|k| k.ends_with(".csv") || k.ends_with(".csv.gz")).collect();
    assert_eq!(copies.len(), 2, "only the first export's two copies: {copies:?}");
}

/// Replicas A and B of `logs serve` over `data`, sharing a spool in moto's bucket `spool` with
/// leases of `ttl`, logging to `a.log` and `b.log` in `logs`.
fn two_replicas(data: &Path, s3: &S3Server, ttl: &str, logs: &Path) -> (Served, Served) {
    let flags = [&bucket_spool()[..], &["--spool-lease-ttl", ttl]].concat();
    let replica = |name: &str| {
        let log = std::fs::File::create(logs.join(name)).unwrap();
        serve_env(data.as_os_str(), &flags, std::process::Stdio::from(log), &s3.env())
    };
    (replica("a.log"), replica("b.log"))
}

/// A replica asked for an export that another replica prepares waits for it
/// (`--prepared-wait`), looking for it in the spool, and answers 200 with that replica's export
/// once it is there: no 202, and no second job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_asked_for_an_export_another_prepares_waits_for_it_and_serves_it() {
    let data = one_large_day();
    let s3 = S3Server::start();
    s3.create_bucket("spool");
    let logs = tempfile::tempdir().unwrap();
    let replica = |name: &str, flags: &[&str]| {
        let log = std::fs::File::create(logs.path().join(name)).unwrap();
        serve_env(data.path().as_os_str(), flags, std::process::Stdio::from(log), &s3.env())
    };
    // A answers 202 at once; B waits up to a minute.
    let a = replica("a.log", &bucket_spool());
    let b = replica(
        "b.log",
        &["--spool", "s3://spool/prepared", "--prepare", "always", "--prepared-wait", "60s"],
    );
    logs_server::install_tls_provider();
    let client = reqwest::Client::builder().timeout(Duration::from_secs(120)).build().unwrap();
    let target =
        "errors.csv?application_id=1001&date_since=2026-10-01&date_until=2026-10-01&fields=error_id,error";
    let get = |served: &Served| {
        client
            .get(format!("{}/logs/v1/export/{target}", served.base))
            .header("Authorization", format!("OAuth {}", served.token))
            .send()
    };
    assert_eq!(get(&a).await.unwrap().status(), 202);
    let waited = get(&b).await.unwrap();
    assert_eq!(waited.status(), 200);
    assert!(waited.bytes().await.unwrap() == export(data.path(), target));
    let b_log = std::fs::read_to_string(logs.path().join("b.log")).unwrap();
    assert!(!b_log.contains("preparing an export"), "B prepared it too:\n{b_log}");
    let a_log = std::fs::read_to_string(logs.path().join("a.log")).unwrap();
    assert_eq!(a_log.matches("preparing an export").count(), 1, "{a_log}");
}

fn bucket_keys(s3: &S3Server) -> Vec<String> {
    let mut keys = s3.keys("spool", "prepared/");
    keys.sort();
    keys
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_over_one_bucket_prepare_each_export_once_and_take_over_the_job_of_one_that_died() {
    let data = one_large_day();
    let s3 = S3Server::start();
    s3.create_bucket("spool");
    let logs = tempfile::tempdir().unwrap();
    let (a, b) = two_replicas(data.path(), &s3, "10s", logs.path());
    logs_server::install_tls_provider();
    let client = reqwest::Client::builder().timeout(Duration::from_secs(120)).build().unwrap();
    let url = |served: &Served, target: &str| format!("{}/logs/v1/export/{target}", served.base);
    let get = |served: &Served, target: &str| {
        client.get(url(served, target)).header("Authorization", format!("OAuth {}", served.token)).send()
    };

    // A prepares (it holds the lease before it answers 202); B, asked the same meanwhile,
    // answers 202 from A's lease and prepares nothing.
    let first =
        "errors.csv?application_id=1001&date_since=2026-10-01&date_until=2026-10-01&fields=error_id,error";
    let asked = Instant::now();
    assert_eq!(get(&a, first).await.unwrap().status(), 202);
    let joined = get(&b, first).await.unwrap();
    assert_eq!(joined.status(), 202);
    let body: serde_json::Value = serde_json::from_slice(&joined.bytes().await.unwrap()).unwrap();
    assert_eq!(body["status"], "preparing");
    // How long A's job has run, by its lease: at most since A was asked (read in whole
    // milliseconds on both sides of the lease, hence the 2 ms).
    let seconds = body["seconds"].as_f64().unwrap();
    assert!((0.0..=asked.elapsed().as_secs_f64() + 0.002).contains(&seconds), "{body}");
    let done = until_done(&client, &url(&b, first), &b.token).await;
    assert_eq!(done.status(), 200, "B serves what A prepared");
    let etag = done.headers()["etag"].clone();
    let expected = export(data.path(), first);
    assert!(done.bytes().await.unwrap() == expected);
    let from_a = get(&a, first).await.unwrap();
    assert_eq!(from_a.headers()["etag"], etag);
    // A gives its lease up just after writing the manifest that B found.
    let deadline = Instant::now() + Duration::from_secs(10);
    while bucket_keys(&s3).iter().any(|key| key.ends_with(".lease")) {
        assert!(Instant::now() < deadline, "the lease stayed: {:?}", bucket_keys(&s3));
        std::thread::sleep(Duration::from_millis(20));
    }
    let keys = bucket_keys(&s3);
    assert_eq!(keys.len(), 3, "one manifest and the two copies of one job: {keys:?}");
    let b_log = std::fs::read_to_string(logs.path().join("b.log")).unwrap();
    assert!(!b_log.contains("preparing an export"), "B prepared it too:\n{b_log}");

    // A dies in the middle of a job: its lease expires and the next request to B takes it over.
    let second =
        "errors.csv?application_id=1001&date_since=2026-10-01&date_until=2026-10-01&fields=error,error_id";
    assert_eq!(get(&a, second).await.unwrap().status(), 202);
    let pid = a.child.id().to_string();
    assert!(Command::new("kill").args(["-KILL", &pid]).status().unwrap().success());
    drop(a);
    assert_eq!(get(&b, second).await.unwrap().status(), 202, "the dead replica's lease is still live");
    let done = until_done(&client, &url(&b, second), &b.token).await;
    assert_eq!(done.status(), 200);
    assert!(done.bytes().await.unwrap() == export(data.path(), second));
    let b_log = std::fs::read_to_string(logs.path().join("b.log")).unwrap();
    assert_eq!(b_log.matches("preparing an export").count(), 1, "B took the job over once:\n{b_log}");
    let keys = bucket_keys(&s3);
    assert_eq!(keys.len(), 6, "two exports, each a manifest and its job's two copies: {keys:#?}\n{b_log}");
}

/// A replica stopped past its lease's time, whose job another replica has taken over, does not
/// take the lease back when it runs again: its renewal is conditional on the lease being still
/// its own, and fails; the other replica's renewals go on succeeding.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_stalled_past_its_lease_does_not_take_it_back_from_the_one_that_took_over() {
    let data = one_large_day();
    let s3 = S3Server::start();
    s3.create_bucket("spool");
    let logs = tempfile::tempdir().unwrap();
    // Leases renewed every second.
    let (a, b) = two_replicas(data.path(), &s3, "3s", logs.path());
    let log = |name: &str| std::fs::read_to_string(logs.path().join(name)).unwrap();
    logs_server::install_tls_provider();
    let client = reqwest::Client::builder().timeout(Duration::from_secs(120)).build().unwrap();
    let target =
        "errors.csv?application_id=1001&date_since=2026-10-01&date_until=2026-10-01&fields=error_id,error";
    let url = |served: &Served| format!("{}/logs/v1/export/{target}", served.base);
    let get = |served: &Served| {
        client.get(url(served)).header("Authorization", format!("OAuth {}", served.token)).send()
    };
    let signal = |name: &str, served: &Served| {
        let pid = served.child.id().to_string();
        assert!(Command::new("kill").args([name, &pid]).status().unwrap().success());
    };

    // A starts the job and stops at once, holding the lease; B takes the job over once the
    // lease has expired.
    assert_eq!(get(&a).await.unwrap().status(), 202);
    signal("-STOP", &a);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !log("b.log").contains("preparing an export") {
        assert!(Instant::now() < deadline, "B never took the job over:\n{}", log("b.log"));
        assert_eq!(get(&b).await.unwrap().status(), 202);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // A runs again: its overdue renewal finds the lease B's, and fails.
    signal("-CONT", &a);
    let lost = "the lease of a running job was lost";
    let deadline = Instant::now() + Duration::from_secs(30);
    while !log("a.log").contains(lost) {
        assert!(Instant::now() < deadline, "A renewed a lease B holds:\n{}", log("a.log"));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let done = until_done(&client, &url(&b), &b.token).await;
    assert_eq!(done.status(), 200);
    let expected = export(data.path(), target);
    assert!(done.bytes().await.unwrap() == expected);
    assert!(!log("b.log").contains(lost), "A took B's lease back:\n{}", log("b.log"));

    // A's job goes on and completes too, second or first (B may have answered from A's
    // manifest while its own job still ran): the first manifest stands, the other job deletes
    // its copies, and after both replicas have swept the spool (every lease time) both serve
    // the export at once from the same copies.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !(log("a.log").contains("export prepared") && log("b.log").contains("export prepared")) {
        assert!(Instant::now() < deadline, "a job never ended:\nA:\n{}\nB:\n{}", log("a.log"), log("b.log"));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let second = "another job completed this export first";
    let adopted = [log("a.log"), log("b.log")].iter().filter(|log| log.contains(second)).count();
    assert_eq!(adopted, 1, "A:\n{}\nB:\n{}", log("a.log"), log("b.log"));
    tokio::time::sleep(Duration::from_secs(7)).await;
    let mut etags = Vec::new();
    for served in [&a, &b] {
        let response = get(served).await.unwrap();
        assert_eq!(response.status(), 200, "the export is served without a new job");
        etags.push(response.headers()["etag"].clone());
        assert!(response.bytes().await.unwrap() == expected);
    }
    assert_eq!(etags[0], etags[1]);
    let keys = bucket_keys(&s3);
    let count = |suffix: &str| keys.iter().filter(|k| k.ends_with(suffix)).count();
    assert_eq!((count(".manifest.json"), count(".csv"), count(".csv.gz")), (1, 1, 1), "{keys:?}");
}
