"""Copies one application's errors into SQLite, each record exactly once, late arrivals included.

    python incremental_loader.py BASE_URL TOKEN APPLICATION_ID DATE_SINCE DB_PATH
                                 [--fields error_id,error_datetime,error_name] [--follow SECONDS]

Each run makes one call of a cursor chain (docs/api.md, "Incremental exports"): the first with
`cursor=start`, the next ones with the `Logs-Cursor` the previous call answered. It appends
the records to the table `errors` (one TEXT column per field) and keeps the cursor in the table
`sync_cursor` of the same database. With `--follow`, it calls again every SECONDS.

Why it can be killed at any moment (even with SIGKILL) without losing or doubling a record:
the records of a call and the call's new cursor are written in ONE SQLite transaction, which
is committed only after the whole body has been read. SQLite makes a transaction all or
nothing: a process killed before COMMIT leaves the database as it was (its journal is rolled
back when the database is next opened), so the next run asks again with the old cursor and
gets those records again, once; killed after COMMIT, the records and the cursor that covers
them are both stored, and the next run goes on from there. A broken transfer raises before
COMMIT, which is the same as a kill. Never keep a cursor anywhere else (a file written after
the insert, say): between the two writes a crash loses or repeats a batch.

Exit status: 0 after a successful call (with --follow: runs until stopped), 2 when the chain
cannot go on (409 cursor_conflict: the server's message says from which date to start a new
chain, after deleting what this table holds from that date on), 1 on any other error; on
errors nothing is written.
"""

import argparse
import csv
import io
import sqlite3
import sys
import time

import requests


class ChainBroken(Exception):
    """409: the chain cannot go on exactly once (the message names the date to restart from)."""


def open_db(path: str, fields: list[str]) -> sqlite3.Connection:
    # Autocommit mode: the transaction below is opened and committed explicitly.
    db = sqlite3.connect(path, isolation_level=None)
    columns = ", ".join(f'"{field}" TEXT' for field in fields)
    db.execute(f"CREATE TABLE IF NOT EXISTS errors ({columns})")
    db.execute("CREATE TABLE IF NOT EXISTS sync_cursor (id INTEGER PRIMARY KEY CHECK (id = 1), cursor TEXT NOT NULL)")
    return db


def sync_once(db: sqlite3.Connection, args: argparse.Namespace, fields: list[str]) -> None:
    """One call of the chain: its records and next cursor stored together, or nothing."""
    # The write lock from the start: a second loader on this database waits, then fails.
    db.execute("BEGIN IMMEDIATE")
    try:
        row = db.execute("SELECT cursor FROM sync_cursor").fetchone()
        next_cursor, stored = fetch_into(db, args, fields, row[0] if row else "start")
        db.execute("INSERT OR REPLACE INTO sync_cursor (id, cursor) VALUES (1, ?)", (next_cursor,))
        db.execute("COMMIT")  # only now, with the whole body read
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    print(f"committed {stored} records", flush=True)


def fetch_into(db: sqlite3.Connection, args: argparse.Namespace, fields: list[str], cursor: str):
    """Calls with `cursor` and inserts the records: the next cursor and how many records."""
    params = {
        "application_id": args.application_id,
        "date_since": args.date_since,  # the chain's; the server refuses a different one (400)
        "fields": ",".join(fields),
        "cursor": cursor,
    }
    headers = {"Authorization": f"OAuth {args.token}"}
    url = f"{args.base_url.rstrip('/')}/logs/v1/export/errors.csv"
    while True:
        response = requests.get(url, params=params, headers=headers, stream=True, timeout=(10, 300))
        if response.status_code != 202:
            break
        # A prepared export (`logs serve --prepare always`) not ready yet: ask again.
        response.close()
        time.sleep(float(response.headers.get("Retry-After", "1")))
    with response:
        if response.status_code != 200:
            try:
                message = response.json()["errors"][0]["message"]
            except (ValueError, LookupError, TypeError):
                message = response.text[:500]
            error = ChainBroken if response.status_code == 409 else RuntimeError
            raise error(f"HTTP {response.status_code}: {message}")
        print("reading new records", flush=True)
        # The raw stream (gzip undone, kept open for TextIOWrapper), split only where CSV ends a
        # record: iter_lines() would also split inside values that hold other line breaks. A
        # transfer cut short raises.
        response.raw.decode_content, response.raw.auto_close = True, False
        reader = csv.reader(io.TextIOWrapper(response.raw, encoding="utf-8", newline=""))
        if (header := next(reader, None)) != fields:
            raise RuntimeError(f"unexpected CSV header {header}, asked for {fields}")
        marks = ", ".join("?" * len(fields))
        stored = db.executemany(f"INSERT INTO errors VALUES ({marks})", reader).rowcount
        return response.headers["Logs-Cursor"], stored


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for name in ("base_url", "token", "application_id", "date_since", "db_path"):
        parser.add_argument(name)
    parser.add_argument("--fields", default="error_id,error_datetime,error_name")
    parser.add_argument("--follow", type=float, metavar="SECONDS", help="call again every SECONDS")
    args = parser.parse_args()
    fields = args.fields.split(",")
    db = open_db(args.db_path, fields)
    while True:
        try:
            sync_once(db, args, fields)
        except ChainBroken as error:
            print(f"stopped, nothing stored: {error}", file=sys.stderr)
            return 2
        except Exception as error:  # a refused call, a broken transfer, a full disk...
            print(f"failed, nothing stored: {error!r}", file=sys.stderr)
            return 1
        if args.follow is None:
            return 0
        time.sleep(args.follow)


if __name__ == "__main__":
    sys.exit(main())
