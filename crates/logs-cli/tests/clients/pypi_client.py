"""The PyPI client `appmetrica-logs-api` (0.1.13, unchanged) downloading days of errors from a
running `logs serve`, each day checked against what DuckDB computes from the Parquet files.

    python pypi_client.py BASE_URL TOKEN DATASET_ROOT APPLICATION_ID FIRST_DAY DAYS [MAX_SECONDS]

What the package does, read from its source (`appmetrica_logs_api/client.py`):
- its endpoint is `https://api.appmetrica.yandex.ru/logs/v1/export`, set in `AppMetrica.__init__`
  with no parameter to change it: this script sets the attribute `_api_endpoint` after making
  the client, to `BASE_URL/logs/v1/export` (the same path, on our host);
- each request is a new `requests.request("GET", …)` (a connection of its own, no timeout) with
  `Authorization: OAuth <token>`, `Accept-Encoding: gzip` and `Cache-Control: no-cache` (the
  default of its `cache_control` argument: "a new file is made on a repeated request");
- on 201 or 202 it sleeps `request_latency * 2 ** n` after the n-th such answer (ignoring
  `Retry-After`), then asks again with the same headers; any status but 200, 201 and 202
  raises `AppmetricaApiError`;
- the CSV comes back as `response.content` (the whole body, gunzipped by requests).
`request_latency` (default 10 s: waits of 20, 40, 80 s…) is its documented constructor
argument; 0.5 here (waits of 1, 2, 4 s…) keeps the test short.

The client is given MAX_SECONDS (default 120) in all: a server that answers 202 forever fails
the script, saying how many requests it made, instead of hanging it.

Prints one JSON object: days, requests (all HTTP requests, counted from urllib3's log),
accepted (answers 202), statuses (every answer's status, in order) and rows. Exits non-zero,
saying which day differs, if any does.
"""

import datetime
import io
import json
import logging
import re
import signal
import sys

import duckdb
import pandas
from appmetrica_logs_api import AppMetrica

# The loader's field list (the original API's names) and its DuckDB oracle.
from loader import FIELDS, expected_day

REQUEST_LATENCY = 0.5


class Requests(logging.Handler):
    """Counts the HTTP requests the package makes, from urllib3's debug line for each answer:
    `http://host:port "GET /path HTTP/1.1" STATUS LENGTH`."""

    ANSWER = re.compile(r'"GET \S+ HTTP/[\d.]+" (\d{3}) ')

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.statuses = []

    def emit(self, record):
        found = self.ANSWER.search(record.getMessage())
        if found:
            self.statuses.append(int(found.group(1)))


class OutOfTime(Exception):
    pass


def out_of_time(signum, frame):
    raise OutOfTime()


def main() -> None:
    base, token, root = sys.argv[1], sys.argv[2], sys.argv[3]
    app, first, days = int(sys.argv[4]), datetime.date.fromisoformat(sys.argv[5]), int(sys.argv[6])
    max_seconds = int(sys.argv[7]) if len(sys.argv) > 7 else 120

    counted = Requests()
    urllib3_log = logging.getLogger("urllib3.connectionpool")
    urllib3_log.setLevel(logging.DEBUG)
    urllib3_log.addHandler(counted)

    client = AppMetrica(app_token=token, request_latency=REQUEST_LATENCY)
    client._api_endpoint = f"{base}/logs/v1/export"

    signal.signal(signal.SIGALRM, out_of_time)
    signal.alarm(max_seconds)
    connection = duckdb.connect()
    total = 0
    for offset in range(days):
        day = first + datetime.timedelta(days=offset)
        try:
            body = client.export(
                "errors",
                application_id=str(app),
                fields=FIELDS,
                date_from=datetime.datetime.combine(day, datetime.time(0, 0, 0)),
                date_to=datetime.datetime.combine(day, datetime.time(23, 59, 59)),
            )
        except OutOfTime:
            statuses = counted.statuses
            sys.exit(
                f"{day}: no export after {max_seconds} s: {len(statuses)} requests, "
                f"{statuses.count(202)} answered 202 (each with Cache-Control: no-cache), "
                f"statuses {statuses}"
            )
        frame = pandas.read_csv(io.BytesIO(body), dtype=str, keep_default_na=False)
        if list(frame.columns) != FIELDS:
            sys.exit(f"{day}: the header is {list(frame.columns)}, not the fields asked for")
        got = list(frame.itertuples(index=False, name=None))
        expected = expected_day(connection, root, app, day)
        if sorted(got) != sorted(tuple(row) for row in expected):
            missing = len(set(expected) - set(got))
            sys.exit(f"{day}: downloaded {len(got)} rows, DuckDB computes {len(expected)} ({missing} missing)")
        total += len(got)
    signal.alarm(0)
    report = {
        "days": days,
        "requests": len(counted.statuses),
        "accepted": counted.statuses.count(202),
        "statuses": counted.statuses,
        "rows": total,
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
