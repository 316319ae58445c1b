"""Measuring a tool's run as a whole process, and the rows check: every output read back,
its rows canonicalised as text, sorted and digested. Used by peers.py and the other scripts of
benches/peers.
"""

import csv
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time

import formats


def run_measured(command, out=None, env=None):
    """Runs a command as its own process (after removing its output file `out`, if any): wall
    seconds, CPU seconds, peak RSS in MiB."""
    if out is not None:
        remove_output(out)
    # Write back the previous runs' outputs first, so that their writeback does not land on
    # this run (each query writes gigabytes; without this the same tool varied by ±40%).
    os.sync()
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    stderr = proc.stderr.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{command[:3]} failed: {stderr[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def remove_output(out):
    if os.path.isdir(out):
        shutil.rmtree(out)
    elif os.path.exists(out):
        os.remove(out)


def output_files(out):
    if os.path.isdir(out):
        return sorted(p for p in glob.glob(os.path.join(out, "*")) if os.path.isfile(p))
    return [out]


def canonical_rows(out, fmt, fields):
    """The rows of an output as a sorted list of tuples of text ('' for null or empty)."""
    if fmt in formats.TYPED:
        return sorted(formats.typed_rows(output_files(out), fmt, fields))
    rows = []
    text = lambda v: "" if v is None else str(v)
    for path in output_files(out):
        if fmt == "csv":
            with open(path, newline="", encoding="utf-8-sig") as f:
                reader = csv.reader(f)
                header = next(reader, None)
                if header is None:
                    continue
                index = [header.index(name) for name in fields]
                rows.extend(tuple(r[i] for i in index) for r in reader)
        else:
            with open(path, encoding="utf-8-sig") as f:
                content = f.read()
            stripped = content.lstrip()
            if fmt != "ndjson" and stripped.startswith("{\"data\""):
                records = json.loads(content)["data"]
            elif fmt != "ndjson" and stripped.startswith("["):
                records = json.loads(content)
            else:
                records = [json.loads(line) for line in content.splitlines() if line.strip()]
            rows.extend(tuple(text(r.get(name)) for name in fields) for r in records)
    rows.sort()
    return rows


def digest(rows):
    h = hashlib.sha256()
    for r in rows:
        h.update("\x1f".join(r).encode())
        h.update(b"\x1e")
    return h.hexdigest()[:16], len(rows)


def digest_in_subprocess(out, fmt, fields):
    """The digest of an output's rows, computed in a child process, so that this process stays
    small: a child forked from a large parent would report the parent's pages as its peak RSS."""
    result = subprocess.run([sys.executable, os.path.abspath(__file__), out, fmt, ",".join(fields)],
                            check=True, capture_output=True, text=True)
    value, count = result.stdout.split()
    return value, int(count)


def size_of(out):
    return sum(os.path.getsize(p) for p in output_files(out))


if __name__ == "__main__":
    # measure.py OUT FMT FIELDS: the digest and the number of an output's rows.
    print(*digest(canonical_rows(sys.argv[1], sys.argv[2], sys.argv[3].split(","))))
