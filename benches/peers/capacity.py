"""The figures of the capacity model (docs/operations.md#capacity): one `logs serve` (release
build) over the peer comparison's dataset in a local S3 server (moto, behind `delay-proxy`'s
fixed latency per request), with its spool in the same bucket. Started by
`benches/peers/run --capacity`.

For the wide export (q1: 7 days, 10 fields with the multi-line `error`, CSV) and the point
export (q4: one `error_id` on android, all 30 fields, 30 days), streamed (plain and gzip) and
prepared (the job, then the download of the prepared file), it measures per export: the
server's CPU time (its process's utime + stime), the wall time, the rows and bytes, and the
requests and bytes the store served (the proxy's counters). Then the memory per running export:
the server's peak resident memory with 1, 2, 4 and 8 wide exports at once. Prints a table and
writes the figures as JSON.
"""

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

import peers
from bucket import BUCKET, Bucket, free_port

TOKEN = "capacity-bench-token-5d0c7e"
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """utime + stime of a process, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def status_kib(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1])
    raise KeyError(key)


def metric(port, name):
    body = get(port, "/metrics", auth=False)[2].decode()
    for line in body.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


def get(port, target, headers=None, auth=True):
    """One GET on a fresh connection: status, headers, body as sent (not unpacked)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    try:
        h = dict(headers or {})
        if auth:
            h["Authorization"] = f"OAuth {TOKEN}"
        conn.request("GET", target, headers=h)
        response = conn.getresponse()
        body = response.read()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, body
    finally:
        conn.close()


class Server:
    """`logs serve` over the bucket, its spool in the same bucket."""

    def __init__(self, logs, bucket, dataset_url, folder):
        tokens = os.path.join(folder, "tokens.toml")
        with open(tokens, "w") as f:
            f.write(f'[[tokens]]\nname = "capacity"\ntoken = "{TOKEN}"\nscopes = ["service:read"]\n')
        self.port, self.admin = free_port(), free_port()
        self.log = open(os.path.join(folder, "serve.log"), "w")
        self.process = subprocess.Popen(
            [logs, "serve", "--data", dataset_url, "--spool", f"s3://{BUCKET}/capacity-spool",
             "--listen", f"127.0.0.1:{self.port}", "--admin-listen", f"127.0.0.1:{self.admin}",
             "--tokens", tokens, "--prepared-retry-after", "1s", "--max-exports-per-token", "8",
             "--log", "warn"],
            env=bucket.env, stdout=self.log, stderr=self.log)
        deadline = time.time() + 60
        while True:
            try:
                if get(self.admin, "/readyz", auth=False)[0] == 200:
                    return
            except OSError:
                pass
            if time.time() > deadline or self.process.poll() is not None:
                raise RuntimeError("logs serve did not become ready: see " + self.log.name)
            time.sleep(0.1)

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=60)
        self.log.close()


def measure(server, bucket, action):
    """Runs `action` and returns what the server and the store did meanwhile."""
    pid = server.process.pid
    rows0 = metric(server.admin, "logs_export_rows_total")
    cpu0, store0, t0 = cpu_seconds(pid), bucket.counters(), time.perf_counter()
    body_bytes = action()
    wall = time.perf_counter() - t0
    cpu, store = cpu_seconds(pid) - cpu0, bucket.counters()
    return {
        "wall": wall,
        "cpu": cpu,
        "rows": metric(server.admin, "logs_export_rows_total") - rows0,
        "bytes": body_bytes,
        "store_requests": store["requests"] - store0["requests"],
        "store_bytes": store["bytes"] - store0["bytes"],
    }


def streamed(server, target, gzip):
    def action():
        headers = {"Accept-Encoding": "gzip"} if gzip else {}
        status, _, body = get(server.port, target, headers)
        assert status == 200, status
        return len(body)
    return action


def prepared(server, target):
    """A fresh job (`no-cache`), repeated on 202 until it is ready, then the download."""
    def action():
        headers = {"Prefer": "respond-async", "Cache-Control": "no-cache"}
        while True:
            status, _, body = get(server.port, target, headers)
            if status != 202:
                break
            headers = {"Prefer": "respond-async, wait=10"}
        assert status == 200, (status, body[:300])
        return len(body)
    return action


def download(server, target):
    """The download of an export already prepared."""
    def action():
        status, headers, body = get(server.port, target, {"Prefer": "respond-async"})
        assert status == 200 and "etag" in headers, status
        return len(body)
    return action


def concurrent_peak(server, target, n):
    """Peak resident memory (MiB) of the server while `n` wide exports run at once."""
    pid = server.process.pid
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")
    before = status_kib(pid, "VmRSS:") / 1024
    failures = []

    def one():
        try:
            streamed(server, target, False)()
        except Exception as e:  # noqa: BLE001 - reported below
            failures.append(e)

    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise RuntimeError(f"{len(failures)} of {n} exports at once failed: {failures[0]!r}")
    return before, status_kib(pid, "VmHWM:") / 1024


def median_of(runs):
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--logs", required=True)
    p.add_argument("--delay-proxy", required=True)
    p.add_argument("--data-dir", required=True)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--latency-ms", type=int, default=10)
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "out", "capacity.json"))
    args, _ = p.parse_known_args()

    dataset = os.path.join(args.data_dir, f"peers-{args.rows}")
    if not os.path.isdir(os.path.join(dataset, f"application_id={peers.APP}")):
        subprocess.run([args.logs, "generate", "--out", dataset + ".tmp", "--rows", str(args.rows)], check=True)
        os.rename(dataset + ".tmp", dataset)
    point_id = peers.pick_error_id(peers.files_for(dataset, peers.Query("q4", peers.ALL, 30)))
    days = lambda n: (f"date_since=2026-10-01&date_until=2026-10-{n:02d}%2023:59:59")
    wide = (f"/logs/v1/export/errors.csv?application_id={peers.APP}&{days(7)}"
            f"&fields={','.join(peers.WIDE)}")
    point = (f"/logs/v1/export/errors.csv?application_id={peers.APP}&{days(30)}"
             f"&fields={','.join(peers.ALL)}&error_id={urllib.parse.quote(str(point_id))}&os_name=android")

    bucket = Bucket(args.delay_proxy, args.latency_ms, [dataset])
    folder = tempfile.mkdtemp(prefix="capacity-")
    server = Server(args.logs, bucket, bucket.url(dataset), folder)
    results = {"rows": args.rows, "latency_ms": args.latency_ms, "cores": os.cpu_count(), "exports": {}}
    try:
        idle = status_kib(server.process.pid, "VmRSS:") / 1024
        cold = {name: measure(server, bucket, streamed(server, t, False)) for name, t in (("wide", wide), ("point", point))}
        for name, target in (("wide", wide), ("point", point)):
            cases = {
                "streamed": streamed(server, target, False),
                "streamed, gzip": streamed(server, target, True),
                "prepared (job and download)": prepared(server, target),
                "prepared, download only": download(server, target),
            }
            figures = {}
            for case, action in cases.items():
                figures[case] = median_of([measure(server, bucket, action) for _ in range(args.repeat)])
            figures["first (footers not cached)"] = cold[name]
            results["exports"][name] = figures
        results["idle_rss_mib"] = idle
        results["concurrent_wide"] = {}
        for n in (1, 2, 4, 8):
            before, peak = concurrent_peak(server, wide, n)
            results["concurrent_wide"][n] = {"before_mib": before, "peak_mib": peak}
    finally:
        server.stop()
        bucket.stop()

    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=2)
    print(f"\n{args.rows} rows, {args.latency_ms} ms per store request, {os.cpu_count()} cores; medians of "
          f"{args.repeat} (the first export of each after the start reads the footers)\n")
    print("| export | case | wall s | CPU s | rows | rows per CPU s | MB sent | MB per CPU s | store requests | store MB |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, figures in results["exports"].items():
        rows = figures["streamed"]["rows"]
        for case, r in figures.items():
            # Below the clock's tick (10 ms), a rate means nothing.
            rate = (lambda x: f"{x / r['cpu']:,.0f}") if r["cpu"] >= 0.05 else (lambda x: "–")
            print(f"| {name} | {case} | {r['wall']:.2f} | {r['cpu']:.2f} | {rows:.0f} | {rate(rows)} | "
                  f"{r['bytes'] / 1e6:.1f} | {rate(r['bytes'] / 1e6)} | "
                  f"{r['store_requests']:.0f} | {r['store_bytes'] / 1e6:.1f} |")
    print(f"\nIdle resident memory {idle:.0f} MiB. Wide exports at once: peak resident memory")
    for n, m in results["concurrent_wide"].items():
        print(f"  {n}: {m['peak_mib']:.0f} MiB (from {m['before_mib']:.0f}), "
              f"{(m['peak_mib'] - m['before_mib']) / n:.0f} MiB per export")
    print(f"\nFigures written to {args.out}")


if __name__ == "__main__":
    main()
