"""Reads exports in every format with the readers analysts use, and computes what they must
hold from the dataset's Parquet files with DuckDB (crates/logs-cli/tests/formats.rs).

    python formats.py oracle DATASET_ROOT TARGET...
    python formats.py read ENV BASE_URL TOKEN TARGET...
    python formats.py read-typed-ndjson ENV BASE_URL TOKEN TARGET...
    python formats.py read-files ENV FIELD[,FIELD...] FILE...
    python formats.py broken ENV BASE_URL TOKEN TARGET...

`oracle`: for each target (`errors.<format>?<query>`), the rows DuckDB computes from the
files themselves (`read_parquet` over the dataset's folders, the request's application and
inclusive range of `error_timestamp`, the original API's names of `original-api-aliases.toml`
mapped to what the files hold), each value as JSON: an integer as a number, a text as a
string, null. Prints one JSON object per target: `target`, `fields`, `rows` (sorted).

`read`: downloads each target with `requests` (which asks for gzip), saves the body to a file
as `curl -o` does, and reads the file with every reader of the format that the environment ENV
(`formats` or `pandas15`) holds. `read-files`: the same for files written by `logs export`,
each file's format from its extension. Prints one JSON object per target and reader: `target`,
`format`, `reader`, `columns` (the names it saw), `types` (each column's type as the reader
names it) and `rows` in the order the reader gives them, each value made canonical the same
way (an integer of any width as a number, a float as a float, null, NaN and pandas' NA as
null); or `error` if the reader raised.

`read-typed-ndjson`: as `read`, for NDJSON written with `--json-integers number`: pyarrow,
DuckDB and Polars told each field's published type (`pandas.read_json` as it is,
`pandas_default`).

`broken`: downloads each target (an export that fails after its first bytes) twice, asking for
gzip and for identity, keeping what arrived (gunzipped), and hands that file to every reader of
its format. Prints one JSON object per target, encoding and reader: `target`, `format`,
`reader`, `encoding`, `bytes` (what arrived), `transfer` (`complete` or the exception that
broke it), `refused` (whether the reader raised) and `error`.

The readers of each format:
- csv (the reference): Python's `csv` module.
- json: `json` then a pandas `DataFrame`, DuckDB's `read_json` and Polars' `read_json` (the
  `data` array unnested), each with every field a string, as the JSON format writes them.
- ndjson: `pyarrow.json`, `pandas.read_json(lines=True, dtype=False)`, DuckDB's `read_json`,
  Polars' `read_ndjson`, the first three with every field a string (pyarrow and DuckDB
  would otherwise take `yyyy-mm-dd hh:mm:ss` texts for timestamps).
- parquet: `pyarrow.parquet`, DuckDB's `read_parquet`, Polars' `read_parquet`,
  `pandas.read_parquet` (`pandas_default`) and pyarrow's `to_pandas(types_mapper=
  pandas.ArrowDtype)` (`pandas`, what docs/api.md advises for exact ids).
- arrow: `pyarrow.ipc.open_stream`, Polars' `read_ipc_stream`, DuckDB over the pyarrow
  reader (DuckDB reads Arrow streams through pyarrow), `to_pandas()` (`pandas_default`) and
  `to_pandas(types_mapper=pandas.ArrowDtype)` (`pandas`).
The `pandas15` environment (pandas 1.5, numpy 1.x, pyarrow 14) has no DuckDB or Polars: its
readers are pyarrow's and pandas'.
"""

import csv
import datetime
import json
import math
import os
import sys
import tempfile
import urllib.parse

import numpy
import pandas
import pyarrow
import pyarrow.ipc
import pyarrow.json
import pyarrow.parquet
import requests

# The names of examples/original-api-aliases.toml: an alias and its field, the absent fields.
ALIASES = {"appmetrica_device_id": "service_device_id"}
ABSENT = {"oaid", "android_id"}

READERS = {
    "formats": {
        "csv": ["csv"],
        "json": ["json", "pandas", "duckdb", "polars"],
        "ndjson": ["pyarrow", "pandas", "duckdb", "polars"],
        "parquet": ["pyarrow", "pandas", "pandas_default", "duckdb", "polars"],
        "arrow": ["pyarrow", "pandas", "pandas_default", "duckdb", "polars"],
    },
    "pandas15": {
        "json": ["pandas"],
        "ndjson": ["pyarrow", "pandas"],
        "parquet": ["pyarrow", "pandas", "pandas_default"],
        "arrow": ["pyarrow", "pandas", "pandas_default"],
    },
}


# The typed readers of NDJSON with integers as numbers, in each environment.
TYPED_NDJSON_READERS = {
    "formats": ["pyarrow", "pandas_default", "duckdb", "polars"],
    "pandas15": ["pyarrow", "pandas_default"],
}

# The published types of the integer fields (every other field is a string).
INT64 = {"error_timestamp", "error_receive_timestamp", "mcc", "mnc", "application_id"}
UINT64 = {"service_device_id", *(alias for alias, field in ALIASES.items() if field == "service_device_id")}


def published(name: str, kinds: tuple):
    """The type of field `name` among `kinds` (string, int64, uint64)."""
    return kinds[2] if name in UINT64 else kinds[1] if name in INT64 else kinds[0]


def parse_target(target: str) -> tuple:
    """(format, query parameters) of `errors.<format>?<query>`."""
    path, _, query = target.partition("?")
    return path.removeprefix("errors."), dict(urllib.parse.parse_qsl(query, strict_parsing=True))


def canonical(value):
    """A reader's value as JSON: an integer as a number, a float as a float, text as text,
    every kind of null as null. Anything else is an error: a reader handing out another
    type (a timestamp, bytes) has not read the export as it is."""
    if value is None or value is pandas.NA:
        return None
    if isinstance(value, (bool, numpy.bool_)):
        raise TypeError(f"a boolean {value!r}")
    if isinstance(value, (int, numpy.integer)):
        return int(value)
    if isinstance(value, (float, numpy.floating)):
        return None if math.isnan(value) else float(value)
    if isinstance(value, str):
        return value
    raise TypeError(f"a {type(value).__name__}: {value!r}")


def canonical_rows(rows) -> list:
    return [[canonical(value) for value in row] for row in rows]


# ---------------------------------------------------------------------------------------------
# The oracle.


def unix_seconds(text: str) -> int:
    """`yyyy-mm-dd hh:mm:ss`, UTC, as Unix seconds."""
    when = datetime.datetime.strptime(text, "%Y-%m-%d %H:%M:%S").replace(tzinfo=datetime.timezone.utc)
    return int(when.timestamp())


def oracle(root: str, target: str) -> dict:
    import duckdb

    _, query = parse_target(target)
    fields = query["fields"].split(",")
    columns = []
    for name in fields:
        if name in ABSENT:
            columns.append(f'CAST(NULL AS VARCHAR) AS "{name}"')
        else:
            columns.append(f'"{ALIASES.get(name, name)}" AS "{name}"')
    since, until = query["date_since"], query["date_until"]
    since = unix_seconds(since if " " in since else f"{since} 00:00:00")
    until = unix_seconds(until if " " in until else f"{until} 23:59:59")
    sql = f"""
        SELECT {", ".join(columns)}
        FROM read_parquet('{root}/application_id=*/date=*/*.parquet', hive_partitioning = true, union_by_name = true)
        WHERE application_id = ?
          AND error_timestamp BETWEEN ? AND ?
    """
    rows = canonical_rows(duckdb.connect().execute(sql, [int(query["application_id"]), since, until]).fetchall())
    rows.sort(key=json.dumps)
    return {"target": target, "fields": fields, "rows": rows}


# ---------------------------------------------------------------------------------------------
# The readers: each takes the saved body and the requested fields, and returns (columns,
# types, rows).


def read_csv_module(path: str, fields: list) -> tuple:
    with open(path, newline="", encoding="utf-8") as file:
        records = list(csv.reader(file))
    return records[0], {}, records[1:]


def duckdb_relation(relation) -> tuple:
    return relation.columns, {c: str(t) for c, t in zip(relation.columns, relation.types)}, relation.fetchall()


def polars_frame(frame) -> tuple:
    return frame.columns, {c: str(t) for c, t in frame.schema.items()}, frame.rows()


def pandas_frame(frame) -> tuple:
    types = {c: str(t) for c, t in frame.dtypes.items()}
    rows = [list(row) for row in frame.itertuples(index=False, name=None)]
    return list(frame.columns), types, rows


def arrow_table(table) -> tuple:
    types = {field.name: str(field.type) for field in table.schema}
    return table.column_names, types, [list(row.values()) for row in table.to_pylist()]


def read_json_document(path: str, fields: list, reader: str) -> tuple:
    if reader == "json":
        with open(path, encoding="utf-8") as file:
            records = json.load(file)["data"]
        return list(records[0]) if records else [], {}, [list(r.values()) for r in records]
    if reader == "pandas":
        with open(path, encoding="utf-8") as file:
            return pandas_frame(pandas.DataFrame(json.load(file)["data"]))
    if reader == "duckdb":
        import duckdb

        struct = ", ".join(f'"{name}" VARCHAR' for name in fields)
        columns = "{'data': 'STRUCT(" + struct.replace("'", "''") + ")[]'}"
        relation = duckdb.connect().sql(
            f"SELECT unnest(data, recursive := true) FROM read_json('{path}', columns = {columns})"
        )
        return duckdb_relation(relation)
    if reader == "polars":
        import polars

        schema = {"data": polars.List(polars.Struct({name: polars.String for name in fields}))}
        return polars_frame(polars.read_json(path, schema=schema).explode("data").unnest("data"))
    raise ValueError(reader)


def read_ndjson(path: str, fields: list, reader: str) -> tuple:
    if reader == "pyarrow":
        schema = pyarrow.schema([(name, pyarrow.string()) for name in fields])
        options = pyarrow.json.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error")
        return arrow_table(pyarrow.json.read_json(path, parse_options=options))
    if reader == "pandas":
        return pandas_frame(pandas.read_json(path, lines=True, dtype=False))
    if reader == "duckdb":
        import duckdb

        columns = "{" + ", ".join(f"'{name}': 'VARCHAR'" for name in fields) + "}"
        relation = duckdb.connect().sql(
            f"SELECT * FROM read_json('{path}', format = 'newline_delimited', columns = {columns})"
        )
        return duckdb_relation(relation)
    if reader == "polars":
        import polars

        return polars_frame(polars.read_ndjson(path, schema={name: polars.String for name in fields}))
    raise ValueError(reader)


def read_typed_ndjson(path: str, fields: list, reader: str) -> tuple:
    if reader == "pyarrow":
        kinds = (pyarrow.string(), pyarrow.int64(), pyarrow.uint64())
        schema = pyarrow.schema([(name, published(name, kinds)) for name in fields])
        options = pyarrow.json.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error")
        return arrow_table(pyarrow.json.read_json(path, parse_options=options))
    if reader == "pandas_default":
        return pandas_frame(pandas.read_json(path, lines=True))
    if reader == "duckdb":
        import duckdb

        kinds = ("VARCHAR", "BIGINT", "UBIGINT")
        columns = "{" + ", ".join(f"'{name}': '{published(name, kinds)}'" for name in fields) + "}"
        relation = duckdb.connect().sql(
            f"SELECT * FROM read_json('{path}', format = 'newline_delimited', columns = {columns})"
        )
        return duckdb_relation(relation)
    if reader == "polars":
        import polars

        kinds = (polars.String, polars.Int64, polars.UInt64)
        return polars_frame(polars.read_ndjson(path, schema={name: published(name, kinds) for name in fields}))
    raise ValueError(reader)


def read_parquet(path: str, fields: list, reader: str) -> tuple:
    if reader == "pyarrow":
        return arrow_table(pyarrow.parquet.read_table(path))
    if reader == "pandas":
        return pandas_frame(pyarrow.parquet.read_table(path).to_pandas(types_mapper=pandas.ArrowDtype))
    if reader == "pandas_default":
        return pandas_frame(pandas.read_parquet(path))
    if reader == "duckdb":
        import duckdb

        return duckdb_relation(duckdb.connect().sql(f"SELECT * FROM read_parquet('{path}')"))
    if reader == "polars":
        import polars

        return polars_frame(polars.read_parquet(path))
    raise ValueError(reader)


def read_arrow(path: str, fields: list, reader: str) -> tuple:
    if reader == "polars":
        import polars

        return polars_frame(polars.read_ipc_stream(path))
    with pyarrow.OSFile(path) as file:
        stream = pyarrow.ipc.open_stream(file)
        if reader == "duckdb":
            import duckdb

            connection = duckdb.connect()
            connection.register("stream", stream)
            return duckdb_relation(connection.sql("SELECT * FROM stream"))
        table = stream.read_all()
    if reader == "pyarrow":
        return arrow_table(table)
    if reader == "pandas":
        return pandas_frame(table.to_pandas(types_mapper=pandas.ArrowDtype))
    if reader == "pandas_default":
        return pandas_frame(table.to_pandas())
    raise ValueError(reader)


READ = {
    "csv": lambda path, fields, reader: read_csv_module(path, fields),
    "json": read_json_document,
    "ndjson": read_ndjson,
    "parquet": read_parquet,
    "arrow": read_arrow,
    "typed-ndjson": read_typed_ndjson,
}


def read_with(path: str, format: str, fields: list, reader: str) -> dict:
    """One reader's report on a saved body."""
    try:
        columns, types, rows = READ[format](path, fields, reader)
        return {"columns": list(columns), "types": types, "rows": canonical_rows(rows)}
    except Exception as e:  # noqa: BLE001 - every failure of a reader is reported
        return {"error": f"{type(e).__name__}: {e}"[:2000]}


# ---------------------------------------------------------------------------------------------
# Downloads.


def session(token: str) -> requests.Session:
    s = requests.Session()
    s.headers["Authorization"] = f"OAuth {token}"
    return s


def download(s: requests.Session, base: str, target: str, path: str, encoding: str = "gzip") -> str:
    """Saves the body of `target` to `path` as it arrives (gunzipped), as `curl -o` does:
    `complete`, or the exception that broke the transfer."""
    url = f"{base}/logs/v1/export/{target}"
    headers = {"Accept-Encoding": encoding}
    with s.get(url, headers=headers, stream=True, timeout=120) as response, open(path, "wb") as file:
        if response.status_code != 200:
            sys.exit(f"{target}: {response.status_code} {response.text[:500]}")
        try:
            for chunk in response.iter_content(chunk_size=1 << 16):
                file.write(chunk)
        except (requests.exceptions.RequestException, OSError) as e:
            return f"{type(e).__name__}: {e}"[:500]
    return "complete"


def report(fields: dict, extra: dict) -> None:
    print(json.dumps({**fields, **extra}), flush=True)


def main() -> None:
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "oracle":
        for target in args[1:]:
            print(json.dumps(oracle(args[0], target)), flush=True)
        return
    env = args[0]
    if env not in READERS:
        sys.exit(f"unknown environment {env!r}: one of {sorted(READERS)}")
    with tempfile.TemporaryDirectory() as folder:
        if mode == "read-files":
            fields = args[1].split(",")
            for path in args[2:]:
                format = os.path.splitext(path)[1].removeprefix(".")
                for reader in READERS[env][format]:
                    head = {"target": path, "format": format, "reader": reader}
                    report(head, read_with(path, format, fields, reader))
            return
        base, s = args[1], session(args[2])
        for number, target in enumerate(args[3:]):
            format, query = parse_target(target)
            fields = query["fields"].split(",")
            path = os.path.join(folder, f"{number}.{format}")
            if mode in ("read", "read-typed-ndjson"):
                transfer = download(s, base, target, path)
                if transfer != "complete":
                    sys.exit(f"{target}: the transfer broke: {transfer}")
                if mode == "read-typed-ndjson":
                    format, readers = "typed-ndjson", TYPED_NDJSON_READERS[env]
                else:
                    readers = READERS[env].get(format, [])
                for reader in readers:
                    head = {"target": target, "format": format, "reader": reader}
                    report(head, read_with(path, format, fields, reader))
            elif mode == "broken":
                for encoding in ["gzip", "identity"]:
                    transfer = download(s, base, target, path, encoding)
                    for reader in READERS[env].get(format, []):
                        head = {"target": target, "format": format, "reader": reader, "encoding": encoding}
                        error = read_with(path, format, fields, reader).get("error")
                        outcome = {"transfer": transfer, "refused": error is not None, "error": error}
                        report(head, {"bytes": os.path.getsize(path), **outcome})
            else:
                sys.exit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()
