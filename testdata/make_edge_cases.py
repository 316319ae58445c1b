"""Writes the hand-made edge-case files of testdata/dataset with other tools than ours.

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install pyarrow duckdb
    /tmp/venv/bin/python testdata/make_edge_cases.py

Application 9001 holds them:
- date=2026-10-03/pyarrow-edge-cases.parquet: written by pyarrow with its defaults (Snappy,
  dictionary pages, no bloom filters, no page index) and its own type choices: a
  dictionary-encoded os_name, large_string city, int32 mcc/mnc, a column that is entirely
  null, and no windows_aid column at all. Values: empty strings, non-ASCII text, CR alone,
  a value that is only a quote, commas, quotes, tabs, control characters, U+2028, JSON text,
  service_device_id at 2^64-1 and above 2^63.
- date=2026-10-04/part-00000-duckdb.snappy.parquet: written by DuckDB's COPY (VARCHAR,
  BIGINT, UBIGINT), with a Spark-style `_SUCCESS` marker beside it.
"""

import datetime as dt
import os

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dataset", "application_id=9001")


def when(day, seconds):
    t = dt.datetime(2026, 10, day, tzinfo=dt.timezone.utc) + dt.timedelta(seconds=seconds)
    return int(t.timestamp()), t.strftime("%Y-%m-%d %H:%M:%S")


def pyarrow_file():
    rows = [
        dict(error="", error_name='He said "hi"', city="São Paulo", os_name="android", mcc=250, mnc=1,
             service_device_id=2**64 - 1, error_json='{"k":"v","n":[1,2]}', error_id="e-empty"),
        dict(error="line1\rline2", error_name='"', city='"', os_name="ios", mcc=None, mnc=None,
             service_device_id=2**63, error_json="{}", error_id="e-cr"),
        dict(error='at a.b(C.java:1)\n\tat "x",y\r\nend', error_name="comma, inside", city="Kraków 🚀",
             os_name="android", mcc=-1, mnc=0, service_device_id=0, error_json='{"q":"\\"quoted\\""}',
             error_id="e-multiline"),
        dict(error=None, error_name=None, city=None, os_name=None, mcc=None, mnc=None,
             service_device_id=None, error_json=None, error_id=None),
        dict(error="ctl\x01\x1f and \u2028 sep", error_name="tab\there", city="", os_name="windows", mcc=1, mnc=2,
             service_device_id=9223372036854775809, error_json='{"nested":{"a":[true,null]}}',
             error_id="e-control"),
    ]
    n = len(rows)
    ts = [when(3, 3600 * i + 7) for i in range(n)]
    rts = [when(3, 3600 * i + 67) for i in range(n)]
    col = lambda name: [r[name] for r in rows]
    table = pa.table({
        "error": pa.array(col("error"), pa.string()),
        "error_datetime": pa.array([t[1] for t in ts], pa.string()),
        "error_id": pa.array(col("error_id"), pa.string()),
        "error_json": pa.array(col("error_json"), pa.large_string()),
        "error_name": pa.array(col("error_name"), pa.string()),
        "error_receive_datetime": pa.array([t[1] for t in rts], pa.string()),
        "error_receive_timestamp": pa.array([t[0] for t in rts], pa.int64()),
        "error_timestamp": pa.array([t[0] for t in ts], pa.int64()),
        "service_device_id": pa.array(col("service_device_id"), pa.uint64()),
        "city": pa.array(col("city"), pa.large_string()),
        "connection_type": pa.array(["wifi", "cell", "unknown", None, "wifi"], pa.string()),
        "country_iso_code": pa.array(["BR", "RU", "PL", None, ""], pa.string()),
        "device_ipv6": pa.array(["::ffff:203.0.113.7", "2001:db8::1", None, None, "::1"], pa.string()),
        "os_name": pa.array(col("os_name"), pa.string()).dictionary_encode(),
        "mcc": pa.array(col("mcc"), pa.int32()),
        "mnc": pa.array(col("mnc"), pa.int32()),
        "profile_id": pa.array([None] * n, pa.string()),
        "app_version_name": pa.array(["1.0.0", "1.0.0", "2.0.0-β", None, "1.0.0"], pa.string()),
    })
    folder = os.path.join(ROOT, "date=2026-10-03")
    os.makedirs(folder, exist_ok=True)
    pq.write_table(table, os.path.join(folder, "pyarrow-edge-cases.parquet"))


def duckdb_file():
    folder = os.path.join(ROOT, "date=2026-10-04")
    os.makedirs(folder, exist_ok=True)
    ts = [when(4, 600 * i) for i in range(4)]
    con = duckdb.connect()
    con.execute("""CREATE TABLE t (error VARCHAR, error_datetime VARCHAR, error_id VARCHAR,
        error_name VARCHAR, error_receive_timestamp BIGINT, error_receive_datetime VARCHAR,
        error_timestamp BIGINT, service_device_id UBIGINT, os_name VARCHAR, mcc BIGINT, city VARCHAR)""")
    values = [
        ("duck,\"quoted\"\nsecond line", "e-duck-1", "DuckError", 18446744073709551615, "android", 250, "Zürich"),
        ("", "e-duck-2", "", 42, "ios", None, None),
        (None, "e-duck-3", "x", None, None, 1, "Åland"),
        ("plain", "e-duck-1", "DuckError", 7, "android", 250, "Zürich"),
    ]
    for (t, dt_text), (error, eid, name, dev, os_name, mcc, city) in zip(ts, values):
        con.execute("INSERT INTO t VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [error, dt_text, eid, name, t + 5, when(4, 600 * ts.index((t, dt_text)) + 5)[1], t, dev,
                     os_name, mcc, city])
    path = os.path.join(folder, "part-00000-duckdb.snappy.parquet")
    con.execute(f"COPY t TO '{path}' (FORMAT PARQUET)")
    open(os.path.join(folder, "_SUCCESS"), "w").close()


if __name__ == "__main__":
    pyarrow_file()
    duckdb_file()
