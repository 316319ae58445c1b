"""A loader written for the original API, as the open-source ones are: it copies each day's
errors of one application, one request per day, with its own field list (the original
device-id name and fields this dataset does not hold among them), asks for gzip, and reads the
CSV in chunks with pandas. Then it checks every day against what DuckDB computes from the
Parquet files themselves.

Like the loaders of the original service, it repeats a request answered `202 Accepted` after
its `Retry-After` (the export is being prepared), downloads an export again (up to 3 times)
when its transfer breaks (the connection reset or closed before the body's end, which is how
a server that dies mid-transfer shows), and splits a day answered `400 … Try to use
more parts.` with `parts_count` and `part_number` (2 parts, then 4, 8, … up to 64), the day's
rows being those of all its parts.

    python loader.py BASE_URL TOKEN DATASET_ROOT APPLICATION_ID FIRST_DAY DAYS [PAUSE_SECONDS]
        [--first-pause SECONDS] [--identity]

PAUSE_SECONDS (default 0) is slept after each chunk pandas yields, as a loader inserting each
chunk into a database does; `--first-pause` is slept once more after the first chunk of each
download, as a slow database's first insert. With either pause, the sockets have a small
receive buffer, so that a pause soon stops the server's writes. `--identity` asks for the body
uncompressed (`Accept-Encoding: identity`), so that the bytes on the wire are the CSV's.

Prints one JSON object: days, requests (all HTTP requests), accepted (answers 202), parts (the
most parts a day was split into, 1 if none), retries (broken transfers downloaded again), rows,
whether every answer was gzipped, whether every file came prepared (with a Content-Length and
an ETag), largest_body (the most bytes one answer's body took on the wire) and
read_before_pause (the most bytes of a body read from the wire when its first pause began).
Exits non-zero, saying which day differs, if any does.
"""

import argparse
import datetime
import email.utils
import json
import socket
import sys
import time

import duckdb
import pandas
import requests
import urllib3
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection

# The original API's names: `appmetrica_device_id` is this dataset's `service_device_id`;
# `oaid` and `android_id` are fields this dataset does not hold.
FIELDS = [
    "error_id",
    "error_datetime",
    "error_name",
    "appmetrica_device_id",
    "os_name",
    "os_version",
    "app_version_name",
    "city",
    "error",
    "oaid",
    "android_id",
    "error_receive_timestamp",
]

# What each requested name is in the Parquet files (None: not held, always empty).
SOURCES = {"appmetrica_device_id": "service_device_id", "oaid": None, "android_id": None}

CHUNK_ROWS = 500
MAX_PARTS = 64
# Downloads of one export after a broken transfer.
MAX_RETRIES = 3
# What a broken transfer raises: a reset or closed connection, a body cut short of its
# Content-Length or of its last chunk, a gzip stream cut short.
BROKEN = (requests.exceptions.ConnectionError, requests.exceptions.ChunkedEncodingError, urllib3.exceptions.HTTPError)
MORE_PARTS = "Try to use more parts."
# The longest a loader waits for one export to be prepared.
MAX_PREPARING_SECONDS = 600
RECEIVE_BUFFER = 16 * 1024


class SmallReceiveBuffer(HTTPAdapter):
    """Connections whose socket has a small receive buffer."""

    def init_poolmanager(self, *args, **kwargs):
        kwargs["socket_options"] = HTTPConnection.default_socket_options + [
            (socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER)
        ]
        super().init_poolmanager(*args, **kwargs)


class MoreParts(Exception):
    """The server asks for the export to be split into more parts."""


class Loader:
    def __init__(self, base: str, token: str, app: int, pause: float, first_pause: float, encoding: str):
        self.base, self.app, self.pause, self.first_pause, self.encoding = base, app, pause, first_pause, encoding
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"OAuth {token}"
        if pause > 0 or first_pause > 0:
            adapter = SmallReceiveBuffer()
            self.session.mount("http://", adapter)
            self.session.mount("https://", adapter)
        self.requests = 0
        self.accepted = 0
        self.parts = 1
        self.retries = 0
        self.gzip = True
        self.prepared = True
        self.largest_body = 0
        self.read_before_pause = 0

    def download_day(self, day: datetime.date) -> list:
        params = {
            "application_id": self.app,
            "date_since": f"{day} 00:00:00",
            "date_until": f"{day} 23:59:59",
            "fields": ",".join(FIELDS),
        }
        parts = 1
        while True:
            try:
                if parts == 1:
                    return self.download(day, params)
                rows = []
                for number in range(parts):
                    part = dict(params, parts_count=parts, part_number=number)
                    rows.extend(self.download(f"{day} part {number}/{parts}", part))
                return rows
            except MoreParts:
                if parts >= MAX_PARTS:
                    sys.exit(f"{day}: the server still asks for more parts than {MAX_PARTS}")
                parts *= 2
                self.parts = max(self.parts, parts)

    def download(self, what, params: dict) -> list:
        """One export's rows, downloaded again if its transfer breaks."""
        for attempt in range(MAX_RETRIES + 1):
            try:
                return self.download_once(what, params)
            except BROKEN as e:
                if attempt == MAX_RETRIES:
                    sys.exit(f"{what}: the transfer broke {MAX_RETRIES + 1} times, the last: {e}")
                self.retries += 1
                print(f"{what}: the transfer broke ({type(e).__name__}); downloading it again", file=sys.stderr)

    def download_once(self, what, params: dict) -> list:
        """One export's rows: the request repeated while it is answered 202."""
        url = f"{self.base}/logs/v1/export/errors.csv"
        started = time.monotonic()
        while True:
            self.requests += 1
            with self.session.get(
                url, params=params, stream=True, headers={"Accept-Encoding": self.encoding}, timeout=120
            ) as response:
                if response.status_code == 202:
                    self.accepted += 1
                    delay = retry_after(response.headers.get("Retry-After"))
                    response.content  # the progress, read to keep the connection
                    if time.monotonic() - started + delay > MAX_PREPARING_SECONDS:
                        sys.exit(f"{what}: still being prepared after {MAX_PREPARING_SECONDS} s")
                    time.sleep(delay)
                    continue
                if response.status_code != 200:
                    message = error_message(response)
                    if response.status_code == 400 and MORE_PARTS in message:
                        raise MoreParts()
                    sys.exit(f"{what}: {response.status_code} {message}")
                self.gzip &= response.headers.get("Content-Encoding") == "gzip"
                self.prepared &= "Content-Length" in response.headers and "ETag" in response.headers
                rows = self.read_rows(what, response)
                self.largest_body = max(self.largest_body, response.raw.tell())
                return rows

    def read_rows(self, what, response: requests.Response) -> list:
        response.raw.decode_content = True
        rows = []
        chunks = pandas.read_csv(response.raw, chunksize=CHUNK_ROWS, dtype=str, keep_default_na=False)
        for number, chunk in enumerate(chunks):
            if list(chunk.columns) != FIELDS:
                sys.exit(f"{what}: the header is {list(chunk.columns)}, not the fields asked for")
            rows.extend(chunk.itertuples(index=False, name=None))
            if number == 0 and self.first_pause > 0:
                self.read_before_pause = max(self.read_before_pause, response.raw.tell())
                time.sleep(self.first_pause)
            # Inserting the chunk into a database.
            time.sleep(self.pause)
        return rows


def retry_after(value) -> float:
    """Seconds to wait: `Retry-After` as seconds (a float too) or an HTTP date; 1 if absent."""
    if not value:
        return 1.0
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
        return max(0.0, (when - datetime.datetime.now(datetime.timezone.utc)).total_seconds())
    except (TypeError, ValueError):
        return 1.0


def error_message(response: requests.Response) -> str:
    try:
        return str(response.json().get("message", ""))
    except ValueError:
        return response.text[:500]


def expected_day(connection, root: str, app: int, day: datetime.date) -> list:
    columns = []
    for name in FIELDS:
        source = SOURCES.get(name, name)
        columns.append("''" if source is None else f"coalesce(CAST({source} AS VARCHAR), '')")
    start = int(datetime.datetime.combine(day, datetime.time(), datetime.timezone.utc).timestamp())
    query = f"""
        SELECT {", ".join(columns)}
        FROM read_parquet('{root}/application_id=*/date=*/*.parquet', hive_partitioning = true, union_by_name = true)
        WHERE application_id = ? AND error_timestamp BETWEEN ? AND ?
    """
    return connection.execute(query, [app, start, start + 86_399]).fetchall()


def main() -> None:
    parser = argparse.ArgumentParser(description="A loader of the original API's errors.")
    parser.add_argument("base")
    parser.add_argument("token")
    parser.add_argument("root")
    parser.add_argument("app", type=int)
    parser.add_argument("first", type=datetime.date.fromisoformat)
    parser.add_argument("days", type=int)
    parser.add_argument("pause", type=float, nargs="?", default=0.0)
    parser.add_argument("--first-pause", type=float, default=0.0)
    parser.add_argument("--identity", action="store_true")
    args = parser.parse_args()
    encoding = "identity" if args.identity else "gzip"
    loader = Loader(args.base, args.token, args.app, args.pause, args.first_pause, encoding)
    connection = duckdb.connect()
    total = 0
    for offset in range(args.days):
        day = args.first + datetime.timedelta(days=offset)
        got = loader.download_day(day)
        expected = expected_day(connection, args.root, args.app, day)
        if sorted(got) != sorted(tuple(row) for row in expected):
            missing = len(set(expected) - set(got))
            sys.exit(f"{day}: downloaded {len(got)} rows, DuckDB computes {len(expected)} ({missing} missing)")
        total += len(got)
    report = {
        "days": args.days,
        "requests": loader.requests,
        "accepted": loader.accepted,
        "parts": loader.parts,
        "retries": loader.retries,
        "rows": total,
        "gzip": loader.gzip,
        "prepared": loader.prepared,
        "largest_body": loader.largest_body,
        "read_before_pause": loader.read_before_pause,
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
