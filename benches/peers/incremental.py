"""The incremental benchmark (issue 42): what a loader pays to stay up to date, with a cursor
chain against what loaders do today. Started by `benches/peers/run --incremental`.

On the peer comparison's dataset (`peers-N`, 30 date folders), for a folder and for a bucket:
- a chain is started over the wide fields (q1's, CSV) from the dataset's first day
  (`logs export --cursor-file`, not timed);
- each round, 10 new files of late arrivals land in 10 different old date folders (a date
  folder's file from `logs generate` with another seed, written after the previous call), the
  settle time passes, and the chain's next call is timed;
- beside it, the same round times what a loader does today: the export of the dataset's last
  7 days with the same fields (`date_since`/`date_until`, no cursor).
Both write their CSV to a file, as every peer benchmark does. Bytes and requests come from
`--explain` (run once per round before the timed runs; it never moves the chain on); over the
bucket the proxy's counters of the timed runs are printed too. Medians over the rounds of each
size of new file (`--late-rows`, a list).

The folder is a hard-linked copy (`cp -al`) of the dataset, so the dataset itself is never
changed and no disk is used; the bucket is moto behind `delay-proxy`, as in `--store s3`.
The dataset's dates (2026-10) must be inside the chain's listing window
(`--cursor-max-lateness-days`, counted back from today), so the window is passed explicitly.
"""

import argparse
import datetime
import glob
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import bucket
import peers

NEW_FILES = 10
TARGET_BYTES = 1 / 50
TARGET_TIME = 1 / 20


def dataset_dates(root):
    """The dates of the application's date folders, ascending."""
    folders = glob.glob(os.path.join(root, f"application_id={peers.APP}", "date=*"))
    return sorted(datetime.date.fromisoformat(f.rsplit("=", 1)[1]) for f in folders)


class InFolder:
    """The dataset as a hard-linked copy in a scratch folder: new files go there only."""

    name = "folder"

    def __init__(self, dataset, scratch):
        self.data = os.path.join(scratch, "dataset")
        subprocess.run(["cp", "-al", dataset, self.data], check=True)
        self.env = None

    def add(self, files):
        """Moves each (source, key below the dataset) into the copy with a fresh mtime."""
        for source, key in files:
            target = os.path.join(self.data, key)
            shutil.move(source, target)
            os.utime(target)

    def counters(self):
        return None


class InBucket:
    """The dataset in moto behind delay-proxy (bucket.Bucket); new files are uploaded to moto
    directly, so that the proxy counts only the exports' requests."""

    name = "bucket"

    def __init__(self, dataset, proxy, latency_ms):
        self.bucket = bucket.Bucket(proxy, latency_ms, [dataset])
        self.prefix = os.path.basename(dataset)
        self.data = self.bucket.url(dataset)
        self.env = self.bucket.env

    def add(self, files):
        staging = tempfile.mkdtemp(prefix="incremental-upload-")
        try:
            for source, key in files:
                os.makedirs(os.path.dirname(os.path.join(staging, key)), exist_ok=True)
                shutil.move(source, os.path.join(staging, key))
            bucket.upload(f"http://127.0.0.1:{self.bucket.moto_port}", staging, self.prefix)
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def counters(self):
        return self.bucket.counters()

    def stop(self):
        self.bucket.stop()


def new_files(args, scratch, dates, round_number, late_rows):
    """NEW_FILES files of late arrivals for `round_number`, one per date folder, spread over the
    dataset's dates: the day's file of a `logs generate` run with another seed (about
    `late_rows` rows each). Returns [(local path, key below the dataset)]."""
    out = os.path.join(scratch, f"generated-{round_number}")
    shutil.rmtree(out, ignore_errors=True)
    subprocess.run([args.logs, "generate", "--out", out, "--apps", str(peers.APP), "--rows",
                    str(late_rows * len(dates)), "--days", str(len(dates)), "--start", dates[0].isoformat(),
                    "--seed", str(1000 + round_number)], check=True, capture_output=True)
    step = len(dates) // NEW_FILES
    chosen = [dates[(round_number + i * step) % len(dates)] for i in range(NEW_FILES)]
    files = []
    for k, date in enumerate(chosen):
        folder = os.path.join(f"application_id={peers.APP}", f"date={date.isoformat()}")
        source = os.path.join(out, folder, "part-00000.parquet")
        files.append((source, os.path.join(folder, f"late-round{round_number}-{k}.parquet")))
    return files


def parquet_rows_and_bytes(paths):
    """Rows and bytes of Parquet files (pyarrow in a child, so that this process stays small)."""
    code = ("import sys, pyarrow.parquet as pq; "
            "print(sum(pq.ParquetFile(p).metadata.num_rows for p in sys.argv[1:]))")
    rows = subprocess.run([sys.executable, "-c", code, *paths], check=True, capture_output=True, text=True)
    return int(rows.stdout), sum(os.path.getsize(p) for p in paths)


def storage_figures(explain):
    """From `--explain`'s output: (requests, bytes, rows, Storage line, Cursor line). Requests
    are the folder listings and reads of a folder, the LIST and GET requests of a bucket."""
    lines = explain.splitlines()
    storage = next(l for l in lines if l.startswith("Storage:"))
    numbers = [int(w) for w in storage.replace(",", "").split() if w.isdigit()]
    # Storage: L folder listings, R reads, B bytes read | Storage: L LIST, 0 HEAD, G GET requests, B bytes fetched
    requests = sum(numbers[:-1])
    rows = next(int(l.split(":")[1]) for l in lines if l.startswith("Rows exported:"))
    cursor = next((l.strip() for l in lines if l.startswith("Cursor:")), "")
    return requests, numbers[-1], rows, storage.strip(), cursor


class Exports:
    """The two commands of a round over one store."""

    def __init__(self, args, place, scratch, dates):
        self.args, self.place = args, place
        self.cursor_file = os.path.join(scratch, f"{place.name}.cursor")
        settle = args.bucket_settle if place.name == "bucket" else args.folder_settle
        self.settle = settle
        fields = ",".join(peers.WIDE)
        self.chain = [args.logs, "export", "--data", place.data, "--cursor-file", self.cursor_file,
                      "--app", str(peers.APP), "--since", dates[0].isoformat(), "--fields", fields,
                      "--format", "csv", "--cursor-settle", f"{settle}s",
                      "--cursor-max-lateness-days", str(args.max_lateness_days)]
        week = dates[-7:]
        self.week = [args.logs, "export", "--data", place.data, "--app", str(peers.APP),
                     "--since", week[0].isoformat(), "--until", week[-1].isoformat(), "--fields", fields,
                     "--format", "csv"]
        self.week_label = f"{week[0].isoformat()}..{week[-1].isoformat()}"

    def explain(self, command):
        result = subprocess.run(command + ["--explain"], capture_output=True, text=True, env=self.place.env)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(command[:2])} --explain failed: {result.stderr.strip()[-2000:]}")
        return storage_figures(result.stdout + result.stderr)

    def timed(self, command, out):
        """Wall seconds, and the proxy's requests and bytes (None from a folder)."""
        before = self.place.counters()
        wall = peers.run_measured(command + ["--output", out], out, env=self.place.env)[0]
        after = self.place.counters()
        if before is None:
            return wall, None, None
        return wall, after["requests"] - before["requests"], after["bytes"] - before["bytes"]


def rows_of(out):
    return peers.digest_in_subprocess(out, "csv", peers.WIDE)[1]


def run_store(args, place, scratch, dates):
    exports = Exports(args, place, scratch, dates)
    # The dataset's files (just uploaded to the bucket) settle first: the first call delivers all.
    time.sleep(exports.settle + 1)
    started = time.perf_counter()
    first = subprocess.run(exports.chain + ["--output", "/dev/null"], env=place.env, capture_output=True, text=True)
    if first.returncode != 0:
        raise RuntimeError(f"the chain's first call failed: {first.stderr.strip()[-2000:]}")
    print(f"\n{place.name}: chain started from {dates[0]} over {place.data} "
          f"in {time.perf_counter() - started:.1f} s (not timed)")
    results = {}
    for n, late_rows in enumerate(args.late_rows):
        print(f"  new files of about {late_rows} rows:")
        results[(place.name, late_rows)] = rounds(args, place, scratch, dates, exports, n * args.repeat)
    return results


def rounds(args, place, scratch, dates, exports, first_round):
    """`--repeat` rounds: 10 new files, then the cursor call and the 7-day re-export."""
    cursor_runs, week_runs = [], []
    late_rows = args.late_rows[first_round // args.repeat]
    for r in range(first_round, first_round + args.repeat):
        files = new_files(args, scratch, dates, r, late_rows)
        rows, size = parquet_rows_and_bytes([source for source, _ in files])
        place.add(files)
        time.sleep(exports.settle + 1)
        cursor_explain = exports.explain(exports.chain)
        week_explain = exports.explain(exports.week)
        out_cursor = os.path.join(args.out_dir, f"incremental-{place.name}-cursor.csv")
        out_week = os.path.join(args.out_dir, f"incremental-{place.name}-week.csv")
        # Alternate which of the two runs first.
        order = [("cursor", exports.chain, out_cursor), ("week", exports.week, out_week)]
        timed = {}
        for name, command, out in (order if r % 2 == 0 else order[::-1]):
            timed[name] = exports.timed(command, out)
        delivered = rows_of(out_cursor)
        for out in (out_cursor, out_week):
            peers.remove_output(out)
        if delivered != rows or cursor_explain[2] != rows:
            raise RuntimeError(f"round {r + 1}: the cursor call delivered {delivered} rows ({cursor_explain[2]} with "
                               f"--explain), the new files hold {rows}")
        cursor_runs.append(timed["cursor"] + cursor_explain[:2])
        week_runs.append(timed["week"] + week_explain[:2])
        print(f"   round {r + 1}: {NEW_FILES} new files ({size / 1e6:.2f} MB, {rows} rows) in "
              f"{', '.join(sorted({k.split('/')[1][5:] for _, k in files}))}")
        print(f"     cursor call {timed['cursor'][0]:.3f} s, {delivered} rows; {cursor_explain[3]}; {cursor_explain[4]}")
        print(f"     7-day re-export ({exports.week_label}) {timed['week'][0]:.3f} s, {week_explain[2]} rows; "
              f"{week_explain[3]}")
        if timed["cursor"][1] is not None:
            print(f"     the proxy counted: cursor call {timed['cursor'][1]} requests, {timed['cursor'][2]} bytes; "
                  f"re-export {timed['week'][1]} requests, {timed['week'][2]} bytes")
    return cursor_runs, week_runs


def median(runs, i):
    return statistics.median(r[i] for r in runs)


def report(args, results):
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\n{args.rows} rows; {NEW_FILES} new files per call; medians of {args.repeat} rounds each; "
          f"--cursor-max-lateness-days {args.max_lateness_days}; settle {args.folder_settle} s (folder), "
          f"{args.bucket_settle} s (bucket, {args.latency_ms} ms per request); load average at the end {load}\n")
    print("| store | rows a new file | cursor call: requests | MB read | s | 7-day re-export: requests | MB read "
          "| s | bytes ratio (≤ 1/50) | time ratio (≤ 1/20) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    all_met = True
    for (name, late_rows), (cursor, week) in results.items():
        # Runs: (wall, proxy requests, proxy bytes, explain requests, explain bytes).
        c_req, c_bytes, c_wall = median(cursor, 3), median(cursor, 4), median(cursor, 0)
        w_req, w_bytes, w_wall = median(week, 3), median(week, 4), median(week, 0)
        bytes_ratio, time_ratio = c_bytes / w_bytes, c_wall / w_wall
        met = bytes_ratio <= TARGET_BYTES and time_ratio <= TARGET_TIME
        all_met &= met
        print(f"| {name} | {late_rows} | {c_req:.0f} | {c_bytes / 1e6:.2f} | {c_wall:.3f} | {w_req:.0f} | {w_bytes / 1e6:.1f} | "
              f"{w_wall:.2f} | 1/{w_bytes / c_bytes:.0f} {'met' if bytes_ratio <= TARGET_BYTES else 'NOT met'} | "
              f"1/{w_wall / c_wall:.0f} {'met' if time_ratio <= TARGET_TIME else 'NOT met'} |")
    print("\nALL TARGETS MET" if all_met else "\nSOME TARGETS NOT MET")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--logs", required=True)
    p.add_argument("--delay-proxy")
    p.add_argument("--data-dir", required=True)
    p.add_argument("--rows", type=int, default=5_000_000)
    p.add_argument("--repeat", type=int, default=3, help="rounds (each: 10 new files, one call of each)")
    p.add_argument("--stores", default="folder,s3", help="folder, s3 or both")
    p.add_argument("--latency-ms", type=int, default=10, help="the bucket's delay per request")
    p.add_argument("--late-rows", default="1000,500,250",
                   help="rows in each new file (about): a list, --repeat rounds for each")
    p.add_argument("--max-lateness-days", type=int, default=90,
                   help="--cursor-max-lateness-days: must reach back to the dataset's first day")
    p.add_argument("--folder-settle", type=int, default=1, help="--cursor-settle over the folder, seconds")
    # A bucket's modification times are whole seconds (docs/api.md): 3 s, not 1 s.
    p.add_argument("--bucket-settle", type=int, default=3, help="--cursor-settle over the bucket, seconds")
    p.add_argument("--out-dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "out"))
    args, _ = p.parse_known_args()
    stores = args.stores.split(",")
    args.late_rows = [int(n) for n in args.late_rows.split(",")]
    if not set(stores) <= {"folder", "s3"}:
        p.error("--stores: folder, s3 or folder,s3")
    if "s3" in stores and not args.delay_proxy:
        p.error("--stores s3 needs --delay-proxy")
    dataset = peers.ensure_large(args, args.rows)
    dates = dataset_dates(dataset)
    reach = (datetime.datetime.now(datetime.timezone.utc).date() - dates[0]).days
    if reach > args.max_lateness_days:
        p.error(f"--max-lateness-days {args.max_lateness_days}: the dataset's first day {dates[0]} is {reach} "
                f"days back; give at least {reach} (at most 183)")
    os.makedirs(args.out_dir, exist_ok=True)
    results = {}
    for store in stores:
        # Beside the outputs: the same file system as the dataset's copy, for `cp -al`.
        scratch = tempfile.mkdtemp(prefix="incremental-", dir=args.out_dir)
        try:
            if store == "folder":
                place = InFolder(dataset, scratch)
                results.update(run_store(args, place, scratch, dates))
            else:
                place = InBucket(dataset, args.delay_proxy, args.latency_ms)
                try:
                    results.update(run_store(args, place, scratch, dates))
                finally:
                    place.stop()
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    report(args, results)


if __name__ == "__main__":
    main()
