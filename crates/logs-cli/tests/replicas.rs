//! Replicas behind a real load balancer: three `logs serve` processes over one bucket (moto on
//! loopback), sharing its spool, behind haproxy with the repository's `deploy/haproxy.cfg` —
//! the cluster `logs-cluster` starts (`logs_testkit::cluster`).
//!
//! - through the balancer, the golden outputs and random requests give the bytes one process
//!   gives (`logs export`), whichever replica answers;
//! - the load test's mixed load through the balancer passes every check it makes of one server;
//! - a replica killed mid-load: the transfers it was serving abort visibly, every request
//!   started after the kill succeeds, and the prepared job it held is finished by another
//!   replica once its lease has expired;
//! - a rolling restart (SIGTERM to each replica in turn) under load loses no request;
//! - the same request to several replicas at once is prepared once;
//! - a token's limit of running exports holds across the replicas;
//! - a loader of the original API downloads 14 days through the balancer, with the rows DuckDB
//!   computes, while the replica preparing its export is killed and started again.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::*;
use logs_testkit::cluster::{Cluster, ClusterOptions};

/// How often the balancer asks each replica's `/readyz` in these tests.
const CHECK_INTERVAL: Duration = Duration::from_millis(500);

/// An export of the 2-day generated dataset too large to fit in the socket buffers between a
/// replica and a client that does not read it: the replica is still writing it.
const LARGE: &str =
    "errors.csv?application_id=1001&date_since=2026-10-01&date_until=2026-10-02&fields=error,error_json";

/// Six tokens: with a consistent hash of the token, each replica gets some of them.
fn tokens() -> Vec<(String, String)> {
    (0..6).map(|i| (format!("t{i}"), format!("replica-test-token-{i}-8d1f3a"))).collect()
}

/// The cluster over `dataset`, each replica with `flags` and one partition per query (rows in
/// file order, so that bodies compare byte for byte with `logs export`).
fn cluster(dataset: &Path, folder: &Path, flags: &[&str]) -> Cluster {
    let mut options = ClusterOptions::new(LOGS, dataset, folder);
    options.tokens = tokens();
    options.flags = flags.iter().map(|f| f.to_string()).collect();
    options.env = vec![("LOGS_TARGET_PARTITIONS".to_owned(), "1".to_owned())];
    options.check_interval = CHECK_INTERVAL;
    Cluster::start(options)
}

fn client() -> reqwest::Client {
    logs_server::install_tls_provider();
    reqwest::Client::builder().timeout(Duration::from_secs(120)).build().unwrap()
}

async fn get(client: &reqwest::Client, base: &str, target: &str, token: &str) -> reqwest::Response {
    let url = format!("{base}/logs/v1/export/{target}");
    client.get(url).header("Authorization", format!("OAuth {token}")).send().await.unwrap()
}

/// A gauge of the replica's `/metrics` (0 when it cannot be read).
async fn gauge(client: &reqwest::Client, admin: &str, name: &str) -> u64 {
    let Ok(response) = client.get(format!("{admin}/metrics")).send().await else { return 0 };
    let text = response.text().await.unwrap_or_default();
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// The replica's `logs_prepared_jobs_running`.
async fn jobs_running(client: &reqwest::Client, admin: &str) -> u64 {
    gauge(client, admin, "logs_prepared_jobs_running").await
}

/// The keys of the jobs a replica's log says it started (`preparing an export`).
fn jobs_started(log: &str) -> Vec<String> {
    jobs_logged(log, "preparing an export")
}

/// The keys of the log's lines that contain `message`.
fn jobs_logged(log: &str, message: &str) -> Vec<String> {
    log.lines()
        .filter(|line| line.contains(message) && !line.contains(&format!("{message} failed")))
        .filter_map(|line| line.split("key=").nth(1)?.split_whitespace().next().map(str::to_owned))
        .collect()
}

/// The jobs a replica's log shows started and neither prepared nor failed (the log of a killed
/// replica: the jobs the kill cut).
fn jobs_unfinished(log: &str) -> Vec<String> {
    let mut unfinished = jobs_started(log);
    for ended in
        jobs_logged(log, "export prepared").into_iter().chain(jobs_logged(log, "preparing an export failed"))
    {
        if let Some(at) = unfinished.iter().position(|k| *k == ended) {
            unfinished.remove(at);
        }
    }
    unfinished
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_the_balancer_every_replica_answers_the_bytes_of_one_process() {
    let dataset = testdata();
    let folder = tempfile::tempdir().unwrap();
    let cluster = cluster(&dataset, folder.path(), &[]);
    let client = client();

    // The golden outputs of tests/cli.rs, with every token (so from every replica).
    let ios_day = "application_id=1001&date_since=2026-10-02&date_until=2026-10-02+23:59:59\
        &fields=error_datetime,error_id,error_name,error,os_name,os_version,service_device_id,mcc,city&os_name=ios&limit=25";
    let edge = "application_id=9001&date_since=2026-10-01&date_until=2026-10-07&fields=error_datetime,error,error_name,\
        error_id,error_json,city,os_name,mcc,mnc,service_device_id,device_ipv6,windows_aid,profile_id,app_version_name,application_id";
    let snapshots = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots");
    let golden = [
        ("ios_day.csv", format!("errors.csv?{ios_day}")),
        ("ios_day.json", format!("errors.json?{ios_day}")),
        ("edge_cases.csv", format!("errors.csv?{edge}&use_utf8_bom=true")),
        ("edge_cases.json", format!("errors.json?{edge}&use_utf8_bom=1")),
    ];
    for (_, token) in cluster.tokens() {
        for (snapshot, target) in &golden {
            let response = get(&client, &cluster.url(), target, token).await;
            assert_eq!(response.status(), 200, "{target}");
            let body = response.bytes().await.unwrap();
            assert!(
                body == std::fs::read(snapshots.join(snapshot)).unwrap(),
                "{snapshot} through the balancer"
            );
        }
    }

    // Random requests, each with a random token, against `logs export` on the folder.
    let mut seed: u64 = 0x5eed_1234;
    let mut next = |n: u64| {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (seed >> 33) % n
    };
    let fields =
        ["error_id", "error_datetime", "error_name", "error", "os_name", "city", "mcc", "app_version_name"];
    for _ in 0..30 {
        let app = [1001, 1002, 1003, 9001][next(4) as usize];
        let first = 1 + next(7);
        let last = first + next(8 - first);
        let format = if next(2) == 0 { "csv" } else { "json" };
        let chosen: Vec<&str> = fields.iter().copied().filter(|_| next(3) == 0).collect();
        let chosen = if chosen.is_empty() { vec!["error_id"] } else { chosen };
        let mut target = format!(
            "errors.{format}?application_id={app}&date_since=2026-10-{first:02}&date_until=2026-10-{last:02}+23:59:59&fields={}",
            chosen.join(",")
        );
        if next(3) == 0 {
            target.push_str(["&os_name=ios", "&os_name=android"][next(2) as usize]);
        }
        if next(3) == 0 {
            target.push_str("&date_dimension=receive");
        }
        if next(3) == 0 {
            target.push_str(&format!("&limit={}", 1 + next(300)));
        }
        let token = &cluster.tokens()[next(6) as usize].1;
        let response = get(&client, &cluster.url(), &target, token).await;
        assert_eq!(response.status(), 200, "{target}");
        let body = response.bytes().await.unwrap();
        let expected = export(&dataset, &target);
        assert!(
            body == expected,
            "{target}: {} bytes through the balancer, {} from logs export",
            body.len(),
            expected.len()
        );
    }

    let servers = cluster.servers();
    assert!(servers.iter().all(|s| s.requests > 0), "every replica answered some: {servers:?}");
    // The balancer logs each request (once it has sent the answer's end), and never its token.
    let deadline = Instant::now() + Duration::from_secs(20);
    let log = loop {
        let log = cluster.balancer().log();
        if log.matches("GET /logs/v1/export/").count() >= 54 {
            break log;
        }
        assert!(Instant::now() < deadline, "{log}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    for (_, token) in cluster.tokens() {
        assert!(!log.contains(token.as_str()), "a token in the balancer's log");
    }
}

#[test]
fn a_mixed_load_through_the_balancer_passes_every_check_of_the_load_test() {
    let data = generated(50_000, 7);
    let folder = tempfile::tempdir().unwrap();
    // The load's bad tokens all come from one address: the failed-authentication limit is off.
    let cluster = cluster(data.path(), folder.path(), &["--auth-failure-limit", "0"]);
    let mut args = vec!["logs-loadtest".to_owned(), "--url".into(), cluster.url(), "--data".into()];
    args.push(data.path().display().to_string());
    for (_, token) in cluster.tokens() {
        args.extend(["--token".to_owned(), token.clone()]);
    }
    for replica in cluster.replicas() {
        args.extend(["--admin-url".to_owned(), replica.admin_url()]);
        args.extend(["--pid".to_owned(), replica.pid().unwrap().to_string()]);
    }
    args.extend(
        [
            "--clients",
            "12",
            "--duration",
            "15",
            "--requests",
            "3000",
            "--request-timeout",
            "60",
            "--seed",
            "3",
        ]
        .map(str::to_owned),
    );
    let args = <logs_loadtest::Args as clap::Parser>::parse_from(args);
    let passed = logs_loadtest::run(args).expect("the load test runs");
    assert!(passed, "the load test's checks failed through the balancer (its report is above)");
    let servers = cluster.servers();
    assert!(servers.iter().all(|s| s.requests > 0), "every replica took load: {servers:?}");
}

/// What one request of [`load`] came to.
#[derive(Debug)]
struct Outcome {
    target: String,
    started: Instant,
    ended: Instant,
    result: Result<(), Failure>,
}

impl Outcome {
    /// The target and why it failed, if it did.
    fn describe(&self) -> String {
        match &self.result {
            Ok(()) => format!("{}: complete", self.target),
            Err(Failure::Aborted(why) | Failure::Wrong(why)) => format!("{}: {why}", self.target),
        }
    }
}

#[derive(Debug)]
enum Failure {
    /// The transfer broke: the body could not be read to its end.
    Aborted(String),
    /// Anything else: a status other than 200, or a body that ended cleanly but differs.
    Wrong(String),
}

/// Clients, one per token, each asking for `targets` in turn through `base` until `stop`, and
/// checking each body against the expected bytes; `finished` counts the requests that have ended.
async fn load(
    base: String,
    targets: Arc<Vec<(String, Vec<u8>)>>,
    stop: Arc<AtomicBool>,
    finished: Arc<AtomicUsize>,
) -> Vec<Outcome> {
    let client = client();
    let tasks: Vec<_> = tokens()
        .into_iter()
        .enumerate()
        .map(|(i, (_, token))| {
            let (client, base, targets) = (client.clone(), base.clone(), targets.clone());
            let (stop, finished) = (stop.clone(), finished.clone());
            tokio::spawn(async move {
                let mut outcomes = Vec::new();
                let mut n = i;
                while !stop.load(Ordering::Relaxed) {
                    let (target, expected) = &targets[n % targets.len()];
                    n += 1;
                    let started = Instant::now();
                    let result = match client
                        .get(format!("{base}/logs/v1/export/{target}"))
                        .header("Authorization", format!("OAuth {token}"))
                        .send()
                        .await
                    {
                        Err(e) => Err(Failure::Wrong(format!("no answer: {e}"))),
                        Ok(response) if response.status() != 200 => {
                            let status = response.status();
                            Err(Failure::Wrong(format!(
                                "{status}: {}",
                                response.text().await.unwrap_or_default()
                            )))
                        }
                        Ok(response) => match response.bytes().await {
                            Err(e) => Err(Failure::Aborted(format!("{e:?}"))),
                            Ok(body) if body == expected[..] => Ok(()),
                            Ok(body) => Err(Failure::Wrong(format!(
                                "a clean body of {} bytes, {} expected",
                                body.len(),
                                expected.len()
                            ))),
                        },
                    };
                    outcomes.push(Outcome { target: target.clone(), started, ended: Instant::now(), result });
                    finished.fetch_add(1, Ordering::Relaxed);
                }
                outcomes
            })
        })
        .collect();
    let mut outcomes = Vec::new();
    for task in tasks {
        outcomes.extend(task.await.unwrap());
    }
    outcomes
}

/// Exports of 0.1 to 5 MB of the 2-day dataset, with what `logs export` writes for each.
fn load_targets(data: &Path) -> Arc<Vec<(String, Vec<u8>)>> {
    let targets = [
        "errors.csv?application_id=1001&date_since=2026-10-01&date_until=2026-10-01+23:59:59&fields=error_id,error",
        "errors.json?application_id=1001&date_since=2026-10-02&date_until=2026-10-02+23:59:59&fields=error_id,error_name,city,os_version",
        "errors.csv?application_id=1002&date_since=2026-10-01&date_until=2026-10-02&fields=error_datetime,error,os_name&os_name=android",
        "errors.csv?application_id=1003&date_since=2026-10-01&date_until=2026-10-02&fields=error_id,service_device_id",
    ];
    Arc::new(targets.iter().map(|t| (t.to_string(), export(data, t))).collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_mid_load_aborts_only_its_transfers_and_its_job_is_taken_over() {
    let data = generated(60_000, 2);
    let folder = tempfile::tempdir().unwrap();
    // t0 holds a job, a transfer and a load client's request at the kill.
    let flags = ["--spool-lease-ttl", "10s", "--prepared-retry-after", "1s", "--max-exports-per-token", "4"];
    let mut cluster = cluster(data.path(), folder.path(), &flags);
    let client = client();
    let targets = load_targets(data.path());

    // A prepared export of token t0 starts on t0's replica: that is the one to kill.
    let job = "errors.csv?application_id=1001&date_since=2026-10-01&date_until=2026-10-02\
               &fields=error,error_json,error_id,error_name";
    let t0 = cluster.tokens()[0].1.clone();
    let accepted = client
        .get(format!("{}/logs/v1/export/{job}", cluster.url()))
        .header("Authorization", format!("OAuth {t0}"))
        .header("Prefer", "respond-async")
        .send()
        .await
        .unwrap();
    assert_eq!(accepted.status(), 202);
    let mut victim = None;
    for (i, replica) in cluster.replicas().iter().enumerate() {
        if jobs_running(&client, &replica.admin_url()).await > 0 {
            victim = Some(i);
        }
    }
    let victim = victim.expect("a replica prepares the export");
    // A transfer certainly in flight at the kill: a large export of t0 (so from the victim),
    // its body left unread so that the replica is still writing it.
    let held = get(&client, &cluster.url(), LARGE, &t0).await;
    assert_eq!(held.status(), 200);

    let stop = Arc::new(AtomicBool::new(false));
    let finished = Arc::new(AtomicUsize::new(0));
    let running = tokio::spawn(load(cluster.url(), targets.clone(), stop.clone(), finished.clone()));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        jobs_running(&client, &cluster.replica(victim).admin_url()).await > 0,
        "the job ended before the kill"
    );
    let victim_jobs = jobs_started(&cluster.replica(victim).log());
    let killing = Instant::now();
    cluster.kill(victim);
    let killed = Instant::now();
    // Each client ends at most one request begun before the kill: twelve more ended means at
    // least six begun after it.
    let at_kill = finished.load(Ordering::Relaxed);
    let deadline = killed + Duration::from_secs(120);
    while finished.load(Ordering::Relaxed) < at_kill + 2 * tokens().len() {
        assert!(Instant::now() < deadline, "the load stalled after the kill");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop.store(true, Ordering::Relaxed);
    let outcomes = running.await.unwrap();

    let wrong: Vec<String> = outcomes
        .iter()
        .filter(|o| matches!(o.result, Err(Failure::Wrong(_))))
        .map(Outcome::describe)
        .collect();
    assert!(wrong.is_empty(), "no request may fail otherwise than by an aborted transfer: {wrong:#?}");
    // The held transfer ends in an error, never as a clean short body.
    match held.bytes().await {
        Ok(body) => panic!("the held transfer ended cleanly after the kill, with {} bytes", body.len()),
        Err(e) => assert!(e.is_body() || e.is_decode(), "{e:?}"),
    }
    // Of the load, only transfers in flight at the kill may have been cut.
    let aborted: Vec<&Outcome> =
        outcomes.iter().filter(|o| matches!(o.result, Err(Failure::Aborted(_)))).collect();
    for o in &aborted {
        assert!(o.started < killed && o.ended >= killing, "an abort not in flight at the kill: {o:#?}");
    }
    let after: Vec<&Outcome> = outcomes.iter().filter(|o| o.started >= killed).collect();
    assert!(after.len() >= 6, "{} requests after the kill", after.len());
    assert!(after.iter().all(|o| o.result.is_ok()), "requests after the kill failed: {after:#?}");
    assert!(outcomes.iter().any(|o| o.result.is_ok() && o.started < killed), "the load ran before the kill");
    let cut: Vec<String> = aborted.iter().map(|o| o.describe()).collect();
    println!("{} requests; the transfers the kill cut: {cut:#?}", outcomes.len());

    // The job: another replica takes it over once the dead one's lease has expired.
    let done = until_done(&client, &format!("{}/logs/v1/export/{job}", cluster.url()), &t0).await;
    assert_eq!(done.status(), 200);
    assert!(done.bytes().await.unwrap() == export(data.path(), job), "the prepared export differs");
    let key = victim_jobs.last().expect("the victim logged its job").clone();
    let takers: Vec<usize> = (0..cluster.replicas().len())
        .filter(|&i| i != victim && jobs_started(&cluster.replica(i).log()).contains(&key))
        .collect();
    assert_eq!(takers.len(), 1, "one other replica took the job over: {takers:?}");
    cluster.restart(victim);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_under_load_loses_no_request() {
    let data = generated(60_000, 2);
    let folder = tempfile::tempdir().unwrap();
    let mut cluster = cluster(data.path(), folder.path(), &[]);
    let targets = load_targets(data.path());
    let stop = Arc::new(AtomicBool::new(false));
    let running = tokio::spawn(load(cluster.url(), targets, stop.clone(), Arc::default()));
    tokio::time::sleep(Duration::from_secs(2)).await;
    for i in 0..cluster.replicas().len() {
        let before = cluster.servers()[i].requests;
        cluster.terminate(i);
        // Draining: the balancer takes it out, while it still serves what it was sent.
        cluster.wait_until_balancer_sees(i, "DOWN");
        let status = cluster.wait(i, Duration::from_secs(60));
        assert!(status.success(), "replica {i} exited with {status}:\n{}", cluster.replica(i).log());
        assert!(cluster.replica(i).log().contains("draining"), "{}", cluster.replica(i).log());
        cluster.restart(i);
        assert!(before > 0, "replica {i} served nothing before its restart");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.store(true, Ordering::Relaxed);
    let outcomes = running.await.unwrap();
    let failed: Vec<&Outcome> = outcomes.iter().filter(|o| o.result.is_err()).collect();
    assert!(failed.is_empty(), "{} of {} requests failed: {failed:#?}", failed.len(), outcomes.len());
    assert!(outcomes.len() >= 30, "{} requests", outcomes.len());
    println!("{} requests through a rolling restart, all complete", outcomes.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_request_to_every_replica_at_once_is_prepared_once() {
    let data = generated(20_000, 2);
    let folder = tempfile::tempdir().unwrap();
    let cluster = cluster(data.path(), folder.path(), &["--prepared-retry-after", "1s"]);
    let client = client();
    let token = cluster.tokens()[0].1.clone();
    let targets: Vec<String> = ["error_id,error", "error,error_id", "error_name,error", "city,error,mcc"]
        .iter()
        .map(|fields| {
            format!(
                "errors.csv?application_id=1001&date_since=2026-10-01&date_until=2026-10-02&fields={fields}"
            )
        })
        .collect();
    for target in &targets {
        let asks = cluster.replicas().iter().map(|replica| {
            client
                .get(format!("{}/logs/v1/export/{target}", replica.url()))
                .header("Authorization", format!("OAuth {token}"))
                .header("Prefer", "respond-async")
                .send()
        });
        for answer in futures::future::join_all(asks).await {
            let status = answer.unwrap().status();
            assert!(status == 202 || status == 200, "{status}");
        }
        let expected = export(data.path(), target);
        let mut etags = Vec::new();
        for replica in cluster.replicas() {
            let done =
                until_done(&client, &format!("{}/logs/v1/export/{target}", replica.url()), &token).await;
            assert_eq!(done.status(), 200);
            etags.push(done.headers()["etag"].clone());
            assert!(done.bytes().await.unwrap() == expected, "{target} from {}", replica.url());
        }
        assert!(etags.iter().all(|e| *e == etags[0]), "one export, one ETag: {etags:?}");
    }
    let started: Vec<String> = cluster.replicas().iter().flat_map(|r| jobs_started(&r.log())).collect();
    assert_eq!(started.len(), targets.len(), "each export prepared once: {started:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tokens_limit_of_running_exports_holds_across_the_replicas() {
    let data = generated(60_000, 2);
    let folder = tempfile::tempdir().unwrap();
    let cluster = cluster(data.path(), folder.path(), &["--max-exports-per-token", "2"]);
    let client = client();
    let token = cluster.tokens()[0].1.clone();

    // Two exports of the token, their bodies left unread: both run.
    let held = [
        get(&client, &cluster.url(), LARGE, &token).await,
        get(&client, &cluster.url(), LARGE, &token).await,
    ];
    assert!(held.iter().all(|r| r.status() == 200));
    // A third through the balancer reaches the same replica, which refuses it.
    let third = get(&client, &cluster.url(), LARGE, &token).await;
    assert_eq!(third.status(), 429, "{}", third.text().await.unwrap());
    assert_eq!(third.headers()["retry-after"], "5");
    // Sent straight to another replica, the same token would run a third: the balancer's
    // hash of the token is what makes the limit hold across the replicas.
    let mut running = Vec::new();
    for replica in cluster.replicas() {
        running.push(gauge(&client, &replica.admin_url(), "logs_exports_running").await);
    }
    let holder =
        running.iter().position(|&n| n == 2).unwrap_or_else(|| panic!("exports running: {running:?}"));
    assert_eq!(running.iter().sum::<u64>(), 2, "{running:?}");
    let other = cluster.replica((holder + 1) % cluster.replicas().len());
    let around = get(&client, &other.url(), LARGE, &token).await;
    assert_eq!(around.status(), 200);
    drop(around);
    drop(held);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loader_downloads_14_days_through_the_balancer_while_a_replica_is_killed_and_restarted() {
    let data = generated(12_000, 14);
    let folder = tempfile::tempdir().unwrap();
    let aliases = original_api_aliases();
    let flags = ["--field-aliases", &aliases, "--prepared-max-size", "1040KiB", "--spool-lease-ttl", "10s"];
    // Every first request answered 202, as the loader's repeats are part of the test.
    let flags = [&flags[..], &PREPARE_ALWAYS_AT_ONCE].concat();
    let mut cluster = cluster(data.path(), folder.path(), &flags);
    let client = client();
    let token = cluster.tokens()[0].1.clone();
    let root = data.path().display().to_string();
    let args = [cluster.url(), token, root, "1001".into(), "2026-10-01".into(), "14".into()];
    let loader = common::python::spawn_script("loader.py", &args);

    // The replica preparing the loader's export dies in the middle of a job, and comes back.
    let deadline = Instant::now() + Duration::from_secs(60);
    let victim = 'found: loop {
        for (i, replica) in cluster.replicas().iter().enumerate() {
            if jobs_running(&client, &replica.admin_url()).await > 0 {
                break 'found i;
            }
        }
        assert!(Instant::now() < deadline, "no job seen within 60 s");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    cluster.kill(victim);
    let cut = jobs_unfinished(&cluster.replica(victim).log());
    tokio::time::sleep(Duration::from_secs(2)).await;
    cluster.restart(victim);

    let output = tokio::task::spawn_blocking(move || loader.wait_with_output()).await.unwrap().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the loader failed: {}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(report["days"], 14, "{report}");
    assert_eq!(report["prepared"], true, "{report}");
    let target = "errors.csv?application_id=1001&date_since=2026-10-01%2000:00:00\
                  &date_until=2026-10-14%2023:59:59&fields=error_id";
    let lines = export(data.path(), target).split(|&b| b == b'\n').filter(|l| !l.is_empty()).count() as u64;
    assert_eq!(report["rows"].as_u64(), Some(lines - 1), "{report}");

    // The job cut by the kill was taken over, after its lease expired, by a replica alive then.
    let key = cut.last().expect("the kill cut a job the victim had logged").clone();
    let taken = (0..cluster.replicas().len())
        .any(|i| i != victim && jobs_started(&cluster.replica(i).log()).contains(&key));
    let again = jobs_started(&cluster.replica(victim).log()).iter().filter(|k| **k == key).count() > 1;
    assert!(taken || again, "the cut job {key} was never prepared again");
    println!("loader: {report}; the job cut on replica {} was prepared again", victim + 1);
}
