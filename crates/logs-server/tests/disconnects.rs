//! Many clients dropping mid-export, round after round, leak nothing: afterwards no export is
//! running (every one counted cancelled, none failed), the process has as many file handles as
//! before (a small tolerance for the runtime), and neither the bytes it holds allocated nor its
//! resident memory grow from round to round (after two warm-up rounds). The server runs on
//! jemalloc, as in `logs serve`, whose count of live bytes is exact where resident memory also
//! holds what the allocator keeps for reuse.
//!
//! One test in this binary on purpose: file handles and resident memory are the process's, and
//! another test running beside it would disturb them.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::*;
use logs_core::EngineConfig;
use logs_server::{AppState, ServeOptions, Settings};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const CLIENTS: usize = 50;
const ROUNDS: usize = 5;
/// Rounds run before the measured ones: the allocator's arenas and caches fill up over the
/// first two (resident memory climbs by about 70 MiB, then stays within ±40 MiB).
const WARMUP_ROUNDS: usize = 2;
/// File handles the runtime may open or close between two counts (blocking-pool threads do
/// not hold any; this covers an epoll or timer handle and a socket still closing).
const FD_TOLERANCE: usize = 8;
/// Resident memory may grow this much from the first measured round to the last (allocator
/// noise: ±40 MiB observed). What one round's exports hold at once is larger (40 exports ×
/// (a 512 KiB chunk + a 1024-row batch + a compressed column chunk) ≈ 150 MiB), so leaking
/// even part of it every round would exceed it by round 5.
const RSS_TOLERANCE: u64 = 96 << 20;
/// Live bytes (allocated, not freed and not in a thread's cache) may grow this much over the
/// same rounds: they stay near 1 MiB after each round. One leaked 1024-row batch per export
/// would add about 40 MiB a round.
const LIVE_TOLERANCE: u64 = 4 << 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_dropping_mid_export_leak_nothing() {
    let settings = Settings {
        max_exports: CLIENTS + 14,
        max_exports_per_token: CLIENTS + 14,
        chunk_queue: 1,
        ..Settings::default()
    };
    let options = ServeOptions::for_settings(&settings);
    // Small batches: each of the 50 exports decodes one before its first byte, and a client
    // drops soon after; what is measured is what stays behind, not how fast exports start.
    let config = EngineConfig { target_partitions: 1, batch_size: 1024, ..EngineConfig::default() };
    let state = AppState::new(engine(large_dataset(), config), token_auth(), settings).await.unwrap();
    let server = TestServer::start(state, options).await;
    let metrics = server.state.metrics().clone();
    let target = format!("/logs/v1/export/errors.csv?{LARGE_QUERY}");

    eprintln!("before: {} file handles, VmRSS {} MiB", fd_count(), vm_rss() >> 20);
    // The warm-up rounds fill what is made once (the runtime's threads, the allocator's arenas).
    let mut fds = Vec::new();
    let mut lives = Vec::new();
    let mut rss = Vec::new();
    let mut ok_total = 0;
    for round in 0..WARMUP_ROUNDS + ROUNDS {
        let before = metrics.exports();
        let clients: Vec<_> =
            (0..CLIENTS).map(|i| tokio::spawn(drop_mid_export(server.addr, target.clone(), i))).collect();
        let mut ok = 0;
        for client in clients {
            ok += usize::from(client.await.unwrap());
        }
        eventually("every export of the round has ended", || metrics.exports().running == 0).await;
        eventually("every permit is back", || server.state.limiter().running() == 0).await;
        eventually("no encoded bytes are held", || metrics.exports().buffered == 0).await;
        let after = metrics.exports();
        let ended = (after.cancelled - before.cancelled) + (after.completed - before.completed);
        assert_eq!(after.failed, before.failed, "round {round}: an export failed");
        assert_eq!(
            after.completed, before.completed,
            "round {round}: an export completed into a dropped client"
        );
        assert!(
            ended as usize >= ok,
            "round {round}: {ok} clients saw 200 but {ended} exports were cancelled"
        );
        ok_total += ok;

        // The server's side of each connection closes once it notices the client is gone.
        let baseline = fds.first().copied();
        let count = settle_fd_count(baseline).await;
        let resident = vm_rss();
        let live = live_bytes();
        eprintln!(
            "round {round}: {ok}/{CLIENTS} saw 200, {} cancelled in all; {count} file handles, VmRSS {} MiB, live {:.1} MiB",
            after.cancelled,
            resident >> 20,
            live as f64 / (1u64 << 20) as f64
        );
        if round >= WARMUP_ROUNDS {
            fds.push(count);
            rss.push(resident);
            lives.push(live);
        }
    }
    assert!(ok_total >= ROUNDS * CLIENTS / 2, "most clients got an export started: {ok_total}");

    let (first, last) = (fds[0], *fds.last().unwrap());
    assert!(last <= first + FD_TOLERANCE, "file handles grew from {first} to {last} over {ROUNDS} rounds");
    let (first, last) = (rss[0], *rss.last().unwrap());
    assert!(
        last <= first + RSS_TOLERANCE,
        "resident memory grew from {} MiB after measured round 1 to {} MiB after round {ROUNDS}",
        first >> 20,
        last >> 20
    );
    // Resident memory also holds what the allocator keeps for reuse; the live bytes are what
    // the server still holds, so a leak shows there first, and exactly.
    let (first, last) = (lives[0], *lives.last().unwrap());
    assert!(
        last <= first + LIVE_TOLERANCE,
        "live bytes grew from {first} after measured round 1 to {last} after round {ROUNDS}"
    );
    server.stop().await;
}

/// One client: sends the export request and goes away at a point chosen by `i`; true if it
/// saw the status line `200`.
async fn drop_mid_export(addr: SocketAddr, target: String, i: usize) -> bool {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(32 * 1024).unwrap();
    let mut stream = socket.connect(addr).await.unwrap();
    let gzip = if i % 5 == 4 { "Accept-Encoding: gzip\r\n" } else { "" };
    let request =
        format!("GET {target} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: OAuth {READER}\r\n{gzip}\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    // How much to read before dropping the connection: nothing, the head, or some of the body.
    let wanted = match i % 5 {
        0 => return false,
        1 => 1,
        2 => 256 * 1024,
        3 => 2 << 20,
        _ => 128 * 1024,
    };
    let mut received = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    while received.len() < wanted {
        let read = tokio::time::timeout(Duration::from_secs(60), stream.read(&mut buf)).await;
        match read {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => received.extend_from_slice(&buf[..n]),
            Err(_) => panic!("client {i}: no data within 60 s"),
        }
    }
    received.starts_with(b"HTTP/1.1 200")
}

/// The number of open file handles, once it has stopped moving (or is back within the
/// tolerance of `baseline`).
async fn settle_fd_count(baseline: Option<usize>) -> usize {
    let mut last = fd_count();
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = fd_count();
        let within = baseline.is_some_and(|b| now <= b + FD_TOLERANCE);
        if within || (now == last && baseline.is_none()) {
            return now;
        }
        last = now;
    }
    last
}

fn fd_count() -> usize {
    std::fs::read_dir("/proc/self/fd").map(|entries| entries.count()).unwrap_or(0)
}

/// The process's resident memory (VmRSS) in bytes.
/// The server runs on the allocator `logs serve` uses.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Bytes the process has allocated and not freed (jemalloc's count, refreshed first), less
/// what the threads' caches hold: jemalloc counts a freed block kept in a thread's cache for
/// reuse as allocated, and those caches fill over the first rounds by up to 10 MiB.
fn live_bytes() -> u64 {
    use tikv_jemalloc_ctl::{Access, AsName};
    tikv_jemalloc_ctl::epoch::advance().unwrap();
    let allocated = tikv_jemalloc_ctl::stats::allocated::read().unwrap();
    // 4096 is MALLCTL_ARENAS_ALL: the sum over every arena.
    let cached: usize = b"stats.arenas.4096.tcache_bytes\0".name().read().unwrap();
    (allocated - cached) as u64
}

fn vm_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}
