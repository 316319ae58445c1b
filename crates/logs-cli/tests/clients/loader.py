"""A loader written for the original API, as the open-source ones are: it copies each day's
errors of one application, one request per day, with its own field list (the original
device-id name and fields this dataset does not hold among them), asks for gzip, and reads the
CSV in chunks with pandas. Then it checks every day against what DuckDB computes from the
Parquet files themselves.

    python loader.py BASE_URL TOKEN DATASET_ROOT APPLICATION_ID FIRST_DAY DAYS

Prints one JSON object: days, requests, rows, and whether every answer was gzipped. Exits
non-zero, saying which day differs, if any does.
"""

import datetime
import json
import sys

import duckdb
import pandas
import requests

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


def download_day(session: requests.Session, base: str, app: int, day: datetime.date) -> tuple[list, bool]:
    params = {
        "application_id": app,
        "date_since": f"{day} 00:00:00",
        "date_until": f"{day} 23:59:59",
        "fields": ",".join(FIELDS),
    }
    url = f"{base}/logs/v1/export/errors.csv"
    with session.get(url, params=params, stream=True, headers={"Accept-Encoding": "gzip"}, timeout=120) as response:
        response.raise_for_status()
        gzipped = response.headers.get("Content-Encoding") == "gzip"
        response.raw.decode_content = True
        rows = []
        chunks = pandas.read_csv(response.raw, chunksize=CHUNK_ROWS, dtype=str, keep_default_na=False)
        for chunk in chunks:
            if list(chunk.columns) != FIELDS:
                sys.exit(f"{day}: the header is {list(chunk.columns)}, not the fields asked for")
            rows.extend(chunk.itertuples(index=False, name=None))
    return rows, gzipped


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
    base, token, root = sys.argv[1], sys.argv[2], sys.argv[3]
    app, first, days = int(sys.argv[4]), datetime.date.fromisoformat(sys.argv[5]), int(sys.argv[6])
    session = requests.Session()
    session.headers["Authorization"] = f"OAuth {token}"
    connection = duckdb.connect()
    total, all_gzipped = 0, True
    for offset in range(days):
        day = first + datetime.timedelta(days=offset)
        got, gzipped = download_day(session, base, app, day)
        expected = expected_day(connection, root, app, day)
        if sorted(got) != sorted(tuple(row) for row in expected):
            missing = len(set(expected) - set(got))
            sys.exit(f"{day}: downloaded {len(got)} rows, DuckDB computes {len(expected)} ({missing} missing)")
        total += len(got)
        all_gzipped &= gzipped
    print(json.dumps({"days": days, "requests": days, "rows": total, "gzip": all_gzipped}))


if __name__ == "__main__":
    main()
