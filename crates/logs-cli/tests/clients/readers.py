"""Reads exports from a running `logs serve` with standard readers and reports what each saw.

    python readers.py BASE_URL TOKEN TARGET...

For a CSV target (`errors.csv?...`), one GET with `requests` (which asks for gzip), then:
- `csv`: Python's csv module over the whole body;
- `csv_lines`: Python's csv module over `body.splitlines(keepends=True)`, as a client that
  splits the body into lines first (`iter_lines`-style) feeds it;
- `pandas`: `pandas.read_csv` with default settings;
- `duckdb`: DuckDB's `read_csv` with default settings, on the body saved to a file.
For a JSON target: `requests`' `.json()` and `json.loads` of the body, and a reader that parses
numbers as doubles, as JavaScript's `JSON.parse` does (`json.loads(..., parse_int=float)`):
`double_exact` says whether it got every integer exactly.

Prints one JSON object per target: the record count of each reader, the header each saw, and
whether the line-splitting reader got the same records as the whole-body one.
"""

import csv
import io
import json
import sys
import tempfile

import duckdb
import pandas
import requests


def read_csv(body: bytes) -> dict:
    text = body.decode("utf-8-sig")
    whole = list(csv.reader(io.StringIO(text, newline="")))
    by_lines = list(csv.reader(text.splitlines(keepends=True)))
    frame = pandas.read_csv(io.BytesIO(body))
    with tempfile.NamedTemporaryFile(suffix=".csv") as file:
        file.write(body)
        file.flush()
        connection = duckdb.connect()
        duckdb_rows = connection.execute("SELECT count(*) FROM read_csv(?)", [file.name]).fetchall()[0][0]
        described = connection.execute("SELECT * FROM read_csv(?) LIMIT 0", [file.name]).description
        duckdb_header = [column[0] for column in described]
    return {
        "header": whole[0],
        "csv": len(whole) - 1,
        "csv_lines": len(by_lines) - 1,
        "csv_lines_equal": by_lines == whole,
        "pandas": len(frame),
        "pandas_header": list(frame.columns),
        "duckdb": duckdb_rows,
        "duckdb_header": duckdb_header,
    }


def read_json(response: requests.Response) -> dict:
    parsed = response.json()
    reparsed = json.loads(response.content.decode("utf-8"))
    assert parsed == reparsed
    as_doubles = json.loads(response.content.decode("utf-8"), parse_int=float)
    exact = all(
        value == double or (isinstance(double, float) and int(double) == value)
        for record, doubled in zip(parsed["data"], as_doubles["data"])
        for value, double in zip(record.values(), doubled.values())
    )
    return {
        "json": len(parsed["data"]),
        "starts_with_bom": response.content.startswith(b"\xef\xbb\xbf"),
        "double_exact": exact,
    }


def main() -> None:
    base, token, targets = sys.argv[1], sys.argv[2], sys.argv[3:]
    session = requests.Session()
    session.headers["Authorization"] = f"OAuth {token}"
    for target in targets:
        response = session.get(f"{base}/logs/v1/export/{target}", timeout=120)
        response.raise_for_status()
        report = {"target": target, "content_encoding": response.headers.get("Content-Encoding")}
        if target.startswith("errors.csv"):
            report.update(read_csv(response.content))
        else:
            report.update(read_json(response))
        print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
