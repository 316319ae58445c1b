//! The spool's tests: writes read back, sweeps, leases, the bound, other processes' exports.

use super::manifest::Representation;
use super::*;
use logs_testkit::file_names;
use sha2::{Digest, Sha256};

fn manifest(key: &str, created: u64, bytes: u64) -> Manifest {
    Manifest {
        version: MANIFEST_VERSION,
        key: key.into(),
        job: "j1".into(),
        extension: "csv".into(),
        created,
        rows: 1,
        skipped_shards: 0,
        cursor: None,
        plain: Representation { bytes, sha256: "00".into() },
        gzip: Some(Representation { bytes: 0, sha256: "00".into() }),
    }
}

async fn spool(dir: &Path, ttl: Duration, max_bytes: u64) -> Spool {
    Spool::open(&DatasetLocation::Local(dir.to_owned()), &S3Options::default(), ttl, max_bytes).await.unwrap()
}

/// A spool on `dir` as one of the processes sharing it opens it.
async fn shared(dir: &Path) -> Spool {
    spool(dir, Duration::from_secs(60), 1 << 20).await
}

async fn write(spool: &Spool, key: &str, text: &str) -> Manifest {
    let (manifest, standing) = write_job(spool, key, "j1", text).await;
    assert_eq!(*standing, manifest);
    manifest
}

/// Job `job`'s export of `key`, and the export that stands once it has committed.
async fn write_job(spool: &Spool, key: &str, job: &str, text: &str) -> (Manifest, Arc<Manifest>) {
    let mut writer = spool.writer(key, job, "csv", Some(1));
    let reserved = writer.write(spool, Bytes::from(text.to_owned()), Duration::from_secs(1)).await.unwrap();
    let (plain, gzip) = writer.finish().await.unwrap();
    let manifest = Manifest { plain, gzip, job: job.into(), ..manifest(key, now(), 0) };
    let standing = spool.commit(manifest.clone()).await.unwrap();
    spool.release(reserved);
    (manifest, standing)
}

async fn read_all(spool: &Spool, manifest: &Manifest, gzip: bool, range: Range<u64>) -> Vec<u8> {
    let Ok(stream) = spool.read(manifest, gzip, range).await else { panic!("cannot read") };
    let chunks: Vec<Bytes> = stream.try_collect().await.unwrap();
    chunks.concat()
}

#[tokio::test]
async fn a_written_export_reads_back_whole_in_ranges_and_compressed() {
    let dir = tempfile::tempdir().unwrap();
    let spool = spool(dir.path(), Duration::from_secs(60), 1 << 20).await;
    let text = "a,b\n1,2\n".repeat(1000);
    let manifest = write(&spool, "k1", &text).await;
    assert_eq!(manifest.plain.bytes, text.len() as u64);
    assert_eq!(manifest.plain.sha256, hex::encode(Sha256::digest(text.as_bytes())));
    assert_eq!(read_all(&spool, &manifest, false, 0..manifest.plain.bytes).await, text.as_bytes());
    assert_eq!(read_all(&spool, &manifest, false, 4..12).await, &text.as_bytes()[4..12]);
    let compressed = manifest.gzip.as_ref().unwrap();
    let gz = read_all(&spool, &manifest, true, 0..compressed.bytes).await;
    assert_eq!(hex::encode(Sha256::digest(&gz)), compressed.sha256);
    let mut plain = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&gz[..]), &mut plain).unwrap();
    assert_eq!(plain, text);
    assert_eq!(spool.lookup("k1").as_deref(), Some(&manifest));
    assert_eq!(file_names(dir.path()), ["k1.j1.csv", "k1.j1.csv.gz", "k1.manifest.json"]);
}

#[tokio::test]
async fn reopening_keeps_complete_exports_and_deletes_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let spool = spool(dir.path(), Duration::from_secs(60), 1 << 20).await;
    let kept = write(&spool, "kept", "x\n").await;
    // A job cut short: its copies, no manifest; a local store's unfinished write; a second
    // job's copies of an export whose manifest names the first job's.
    std::fs::write(dir.path().join("cut.j2.csv"), "partial").unwrap();
    std::fs::write(dir.path().join("cut.j2.csv.gz#1"), "partial").unwrap();
    std::fs::write(dir.path().join("kept.j9.csv"), "other").unwrap();
    // An expired export, a manifest that is not one, an expired lease.
    let old = Manifest { created: now() - 120, key: "old".into(), ..kept.clone() };
    std::fs::write(dir.path().join("old.manifest.json"), serde_json::to_vec(&old).unwrap()).unwrap();
    std::fs::write(dir.path().join("old.j1.csv"), "x\n").unwrap();
    std::fs::write(dir.path().join("junk.manifest.json"), "{").unwrap();
    let Claim::Owned(_) = spool.claim("gone", "me", "j0", Duration::from_secs(1)).await.unwrap() else {
        panic!()
    };
    std::fs::write(dir.path().join("gone.j3.csv.gz#1"), "partial").unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    drop(spool);

    let spool = super::tests::spool(dir.path(), Duration::from_secs(60), 1 << 20).await;
    assert_eq!(spool.lookup("kept").as_deref(), Some(&kept));
    assert!(spool.lookup("old").is_none());
    assert_eq!(file_names(dir.path()), ["kept.j1.csv", "kept.j1.csv.gz", "kept.manifest.json"]);
    assert_eq!(spool.usage(), (kept.size(), 0));
}

#[tokio::test]
async fn a_live_lease_keeps_its_job_s_writes_from_the_sweep() {
    let dir = tempfile::tempdir().unwrap();
    let spool = spool(dir.path(), Duration::from_secs(60), 1 << 20).await;
    let Claim::Owned(lease) = spool.claim("busy", "me", "j0", Duration::from_secs(60)).await.unwrap() else {
        panic!("the first claim owns the lease")
    };
    std::fs::write(dir.path().join("busy.j1.csv#1"), "partial").unwrap();
    std::fs::write(dir.path().join("busy.j1.csv"), "done, manifest coming").unwrap();
    spool.sweep().await.unwrap();
    assert_eq!(file_names(dir.path()), ["busy.j1.csv", "busy.j1.csv#1", "busy.lease"]);
    spool.give_up(lease).await;
    spool.sweep().await.unwrap();
    assert!(file_names(dir.path()).is_empty(), "{:?}", file_names(dir.path()));
}

#[tokio::test]
async fn a_lease_is_held_once_renewed_and_taken_over_after_it_expires() {
    let dir = tempfile::tempdir().unwrap();
    let spool = spool(dir.path(), Duration::from_secs(60), 1 << 20).await;
    // Long enough that the checks before the sleep fall inside it on a loaded machine.
    let ttl = Duration::from_secs(4);
    let Claim::Owned(mut lease) = spool.claim("k", "a", "ja", ttl).await.unwrap() else {
        panic!("a owns it")
    };
    let Claim::Held { .. } = spool.claim("k", "b", "jb", ttl).await.unwrap() else { panic!("b must wait") };
    let progress = JobProgress { rows: 10, bytes: 200, covered: 5, total: 50 };
    assert!(spool.renew(&mut lease, ttl, progress).await);
    let Claim::Held { job: Some(job), progress: held, .. } = spool.claim("k", "b", "jb", ttl).await.unwrap()
    else {
        panic!("the holder's progress is seen")
    };
    assert_eq!((job.as_str(), held), ("ja", progress), "the holder's job and progress are seen");
    tokio::time::sleep(ttl + Duration::from_millis(100)).await;
    let Claim::Owned(taken) = spool.claim("k", "b", "jb", ttl).await.unwrap() else {
        panic!("expired: b takes it")
    };
    let Claim::Held { .. } = spool.claim("k", "c", "jc", ttl).await.unwrap() else {
        panic!("b holds it now")
    };
    spool.give_up(taken).await;
    let Claim::Owned(_) = spool.claim("k", "c", "jc", ttl).await.unwrap() else {
        panic!("released: c owns it")
    };
}

#[tokio::test]
async fn the_bound_deletes_the_oldest_exports_then_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let spool = spool(dir.path(), Duration::from_secs(60), 1000).await;
    for (key, created) in [("a", 10), ("b", 20)] {
        spool.commit(manifest(key, now() - 50 + created, 300)).await.unwrap();
    }
    // Filled exactly to the bound: nothing needs to go.
    spool.reserve(400, Duration::from_secs(1)).await.unwrap();
    assert!(spool.lookup("a").is_some() && spool.lookup("b").is_some());
    spool.release(400);
    spool.reserve(500, Duration::from_secs(1)).await.unwrap();
    assert!(spool.lookup("a").is_none(), "the oldest export makes room");
    assert!(spool.lookup("b").is_some());
    assert!(!dir.path().join("a.manifest.json").exists());
    let full = spool.reserve(600, Duration::from_secs(1)).await.unwrap_err();
    assert!(matches!(full, SpoolError::Full { needed: 600, .. }), "{full:?}");
    assert!(spool.lookup("b").is_none(), "everything complete was deleted first");
    assert_eq!(spool.usage(), (0, 500));
    spool.reserve(100, Duration::from_secs(1)).await.unwrap();
    assert_eq!(spool.usage(), (0, 600));
    spool.release(600);
    spool.reserve(1000, Duration::from_secs(1)).await.unwrap();
}

#[tokio::test]
async fn expired_exports_are_not_found_and_are_swept() {
    let dir = tempfile::tempdir().unwrap();
    let spool = spool(dir.path(), Duration::from_secs(60), 1 << 20).await;
    spool.commit(manifest("old", now() - 61, 10)).await.unwrap();
    spool.commit(manifest("new", now(), 10)).await.unwrap();
    // Completed 60 whole seconds ago may be only 59.01 s ago: still kept.
    spool.commit(manifest("edge", now() - 60, 10)).await.unwrap();
    assert!(spool.lookup("old").is_none());
    assert!(spool.lookup("edge").is_some());
    spool.sweep().await.unwrap();
    assert!(!dir.path().join("old.manifest.json").exists());
    assert!(spool.lookup("new").is_some() && spool.lookup("edge").is_some());
    assert_eq!(spool.usage(), (20, 0));
}

#[tokio::test]
async fn an_export_completed_by_another_process_is_found_in_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let (one, two) = (shared(dir.path()).await, shared(dir.path()).await);
    let manifest = write(&one, "shared", "a\n").await;
    assert!(two.lookup("shared").is_none());
    assert_eq!(two.find("shared").await.as_deref(), Some(&manifest));
    assert_eq!(two.lookup("shared").as_deref(), Some(&manifest), "found, and indexed");
    assert_eq!(two.usage(), (manifest.size(), 0));
    assert_eq!(read_all(&two, &manifest, false, 0..2).await, b"a\n");
    assert!(two.find("absent").await.is_none());
}

/// A replica that lost its lease completes the same export as the one that took its job
/// over: the first manifest stands, and the second job deletes its own copies.
#[tokio::test]
async fn the_first_job_to_complete_an_export_stands_and_a_second_deletes_its_copies() {
    let dir = tempfile::tempdir().unwrap();
    let (one, two) = (shared(dir.path()).await, shared(dir.path()).await);
    let first = write(&one, "k", "a\n").await;
    let (_, standing) = write_job(&two, "k", "j2", "a\n").await;
    assert_eq!(*standing, first);
    assert_eq!(file_names(dir.path()), ["k.j1.csv", "k.j1.csv.gz", "k.manifest.json"]);
    assert_eq!(two.lookup("k").as_deref(), Some(&first));
    assert_eq!(two.usage(), (first.size(), 0));
    for spool in [&one, &two] {
        spool.sweep().await.unwrap();
    }
    assert_eq!(file_names(dir.path()), ["k.j1.csv", "k.j1.csv.gz", "k.manifest.json"]);
    assert_eq!(read_all(&two, &first, false, 0..2).await, b"a\n");

    // Deleted by the other process, and prepared here again: the index holds the new export
    // in place of the old one, and counts its size alone.
    two.remove("k").await;
    let (again, standing) = write_job(&one, "k", "j3", "bb\n").await;
    assert_eq!(*standing, again);
    assert_eq!(one.lookup("k").as_deref(), Some(&again));
    assert_eq!(one.usage(), (again.size(), 0));
}

/// Another process deleted an export this one knows (with `Cache-Control: no-cache`, or to
/// make room) and prepared it again: this process's sweep keeps the new copies, and a
/// download of the old ones, found gone, leads to the new export instead of deleting it.
#[tokio::test]
async fn an_export_prepared_again_elsewhere_replaces_the_one_known_here() {
    let dir = tempfile::tempdir().unwrap();
    let (one, two) = (shared(dir.path()).await, shared(dir.path()).await);
    let old = write(&one, "k", "a\n").await;
    two.remove("k").await;
    assert!(file_names(dir.path()).is_empty(), "{:?}", file_names(dir.path()));
    let (new, _) = write_job(&two, "k", "j2", "b\n").await;
    let expected = ["k.j2.csv", "k.j2.csv.gz", "k.manifest.json"];

    assert!(matches!(one.read(&old, false, 0..2).await, Err(ReadError::Gone)));
    one.forget_gone(&old).await;
    assert_eq!(file_names(dir.path()), expected);
    assert_eq!(one.usage(), (new.size(), 0), "the old export forgotten, the new one indexed");
    assert_eq!(one.find("k").await.as_deref(), Some(&new));

    let three = shared(dir.path()).await;
    let (_, standing) = write_job(&three, "k2", "j3", "c\n").await;
    two.remove("k2").await;
    let (again, _) = write_job(&two, "k2", "j4", "c\n").await;
    assert_eq!(standing.job, "j3");
    three.sweep().await.unwrap();
    assert_eq!(three.lookup("k2").as_deref(), Some(&again));
    assert!(dir.path().join("k2.j4.csv").exists() && !dir.path().join("k2.j3.csv").exists());

    // Copies gone with the manifest that names them still there: the manifest goes too.
    std::fs::remove_file(dir.path().join("k.j2.csv")).unwrap();
    two.forget_gone(&new).await;
    assert!(!dir.path().join("k.manifest.json").exists());
    assert!(two.find("k").await.is_none());
}
