//! Faults over HTTP that need `logs serve` as a process: permission denied (the server runs
//! as an unprivileged user) and schema drift (this crate has a Parquet writer).

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use logs_testkit::machine::set_mode;

use super::permissions::{logs_as, readable_twins, unprivileged_logs};
use super::{DAY2, DAY2_FOLDER, export, generate, logs, ok, write_drifted_file};

/// A running `logs serve`, killed when dropped.
struct Served {
    child: Child,
    base: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `logs serve …` and waits for the address it prints.
fn serve(mut command: Command) -> Served {
    use std::io::BufRead;
    let mut child = command.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    // Drains stdout to its end, so that the server never writes into a closed pipe.
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let _ = tx.send(line.unwrap_or_default());
        }
    });
    let mut served = Served { child, base: String::new() };
    loop {
        let line = rx.recv_timeout(Duration::from_secs(60)).expect("`logs serve` prints its address");
        if let Some(address) = line.split(" on http://").nth(1) {
            served.base = format!("http://{}", address.trim());
            return served;
        }
    }
}

const TOKEN: &str = "tok-faults-0123456789";
const TOKENS: &str =
    "[[tokens]]\nname = \"faults\"\ntoken = \"tok-faults-0123456789\"\nscopes = [\"service:read\"]\n";

/// `GET /logs/v1/export/<target>` with the reader token.
async fn get(served: &Served, target: &str) -> reqwest::Response {
    logs_server::install_tls_provider();
    let client = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
    client
        .get(format!("{}/logs/v1/export/{target}", served.base))
        .header("Authorization", format!("OAuth {TOKEN}"))
        .send()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permission_denied_over_http_is_503_or_skipped_and_counted() {
    let Some(nobody) = unprivileged_logs() else { return };
    let file = format!("{DAY2_FOLDER}/part-00000.parquet");
    let (data, twin) = readable_twins(&file);
    set_mode(&data.path().join(&file), 0o000);
    let tokens = data.path().join("tokens.toml");
    std::fs::write(&tokens, TOKENS).unwrap();
    let mut command = logs_as(&nobody);
    command
        .args(["serve", "--listen", "127.0.0.1:0", "--tokens"])
        .arg(&tokens)
        .arg("--data")
        .arg(data.path());
    let served = serve(command);

    let target = format!("errors.csv?{DAY2}&fields=error_id,error,os_name");
    let response = get(&served, &target).await;
    assert_eq!(response.status(), 503);
    let body: serde_json::Value = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
    assert_eq!(body["errors"][0]["error_type"], "storage_unavailable", "{body}");
    assert!(!body.to_string().contains("parquet"), "no path in the answer: {body}");

    let response = get(&served, &format!("{target}&skip_unavailable_shards=true")).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-skipped-shards"], "1");
    let body = response.bytes().await.unwrap();
    assert!(body == ok(export(twin.path(), &[&target])), "not the export of the readable files");
}

/// `logs serve` over `data` as root, with one reader token.
fn serve_as_root(data: &std::path::Path) -> Served {
    let tokens = data.join("tokens.toml");
    std::fs::write(&tokens, TOKENS).unwrap();
    let mut command = logs();
    command.args(["serve", "--listen", "127.0.0.1:0", "--tokens"]).arg(&tokens).arg("--data").arg(data);
    serve(command)
}

/// A file whose column has a type outside the contract is found by the footer check, before
/// any row is read, wherever it sits among the files: 503 `storage_unavailable`; with
/// `skip_unavailable_shards=true` it is left out and counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_column_that_cannot_be_converted_is_503_storage_unavailable() {
    let data = generate(2000, 2, 1 << 20);
    for name in ["aa-drifted.parquet", "zz-drifted.parquet"] {
        write_drifted_file(data.path(), name);
        let served = serve_as_root(data.path());
        for target in DRIFT_TARGETS {
            let response = get(&served, target).await;
            assert_eq!(response.status(), 503, "{name} {target}");
            let body: serde_json::Value = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
            assert_eq!(body["errors"][0]["error_type"], "storage_unavailable", "{body}");
            let response = get(&served, &format!("{target}&skip_unavailable_shards=true")).await;
            assert_eq!(response.status(), 200, "{name} {target}");
            assert_eq!(response.headers()["x-skipped-shards"], "1");
            assert!(response.bytes().await.is_ok(), "{name} {target}: a complete body");
        }
        drop(served);
        std::fs::remove_file(data.path().join(DAY2_FOLDER).join(name)).unwrap();
    }
}

const DRIFT_TARGETS: [&str; 2] = [
    "errors.csv?application_id=1001&date_since=2026-10-02&date_until=2026-10-02&fields=error_id,mcc",
    "errors.json?application_id=1001&date_since=2026-10-02&date_until=2026-10-02&fields=error_id,os_name&mcc=250",
];
