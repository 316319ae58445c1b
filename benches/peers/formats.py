"""The output formats of the peer comparison: how each tool writes a query's rows in each format
(the writing end of its command, built by peers.py), and how the typed outputs (Parquet, Arrow
IPC) are read back for the rows check. Every Parquet writer is asked for zstd, every Arrow
writer for uncompressed buffers, as ours writes them.
"""

import os

# The formats each peer writes with a writer of its own. pyarrow has no JSON or NDJSON writer
# (and is not a CSV peer of the local mode), so it takes part in Parquet and Arrow only.
WRITERS = {
    "duckdb": ("csv", "json", "ndjson", "parquet", "arrow"),
    "polars": ("csv", "json", "ndjson", "parquet", "arrow"),
    "chdb": ("csv", "json", "ndjson", "parquet", "arrow"),
    "datafusion": ("csv", "json", "ndjson", "parquet", "arrow"),
    "pyarrow": ("parquet", "arrow"),
}
TYPED = ("parquet", "arrow")


def has_writer(tool, fmt):
    return tool == "logs" or fmt in WRITERS.get(tool, ())


def write_reader(reader, out):
    """Python code writing the pyarrow RecordBatchReader named `reader` as an Arrow IPC stream."""
    return ("import pyarrow as pa\n"
            f"with pa.ipc.new_stream({out!r}, {reader}.schema) as w:\n"
            f"    for b in {reader}:\n"
            "        w.write_batch(b)\n")


def duckdb_code(select, fmt, out):
    """DuckDB's COPY of the SELECT `select` (its Arrow: a record batch reader into pyarrow's
    IPC stream writer, DuckDB having no IPC writer of its own)."""
    if fmt == "arrow":
        return f"import duckdb\nr = duckdb.connect().sql({select!r}).to_arrow_reader()\n" + write_reader("r", out)
    options = {"csv": "(FORMAT CSV, HEADER)", "json": "(FORMAT JSON, ARRAY true)", "ndjson": "(FORMAT JSON)",
               "parquet": "(FORMAT PARQUET, COMPRESSION zstd)"}[fmt]
    sql = f"COPY ({select}) TO '{out}' {options}"
    return f"import duckdb; duckdb.connect().execute({sql!r})"


def polars_code(lazy, fmt, out):
    """Polars' streaming sink for the LazyFrame expression `lazy`. Its Arrow sink, `sink_ipc`,
    writes the IPC file format (the stream format with a footer): Polars streams no IPC stream."""
    sink = {"csv": f"sink_csv({out!r})", "json": f"sink_ndjson({out!r})", "ndjson": f"sink_ndjson({out!r})",
            "parquet": f"sink_parquet({out!r}, compression='zstd')",
            "arrow": f"sink_ipc({out!r}, compression='uncompressed')"}[fmt]
    return f"import polars as pl; {lazy}.{sink}"


def chdb_code(select, fmt, out):
    settings, name = {
        "csv": ("format_csv_null_representation = ''", "CSVWithNames"),
        "json": ("format_csv_null_representation = ''", "JSONEachRow"),
        "ndjson": ("format_csv_null_representation = ''", "JSONEachRow"),
        "parquet": ("output_format_parquet_compression_method = 'zstd', output_format_parquet_string_as_string = 1",
                    "Parquet"),
        "arrow": ("output_format_arrow_compression_method = 'none', output_format_arrow_string_as_string = 1",
                  "ArrowStream"),
    }[fmt]
    sql = f"{select} SETTINGS {settings} INTO OUTFILE '{out}' FORMAT {name}"
    return f"import chdb; chdb.query({sql!r})"


def datafusion_code(setup, sql, fmt, out):
    """DataFusion-Python's writer for `ctx.sql(sql)` after `setup` (its Arrow: the DataFrame's
    Arrow C stream into pyarrow's IPC stream writer)."""
    df = f"ctx.sql({sql!r})"
    if fmt == "arrow":
        return f"{setup}\nimport pyarrow as pa\nr = pa.RecordBatchReader.from_stream({df})\n" + write_reader("r", out)
    write = {"csv": f"write_csv({out!r}, with_header=True)", "json": f"write_json({out!r})",
             "ndjson": f"write_json({out!r})", "parquet": f"write_parquet({out!r}, compression='zstd')"}[fmt]
    return f"{setup}\n{df}.{write}"


def pyarrow_code(sources, columns, where, fmt, out):
    """pyarrow's dataset over the files (or per-folder globs) `sources`, projected to `columns`
    (a dict of expressions) and filtered by `where`: Parquet by `pq.write_table` of the result,
    Arrow by the scanner's reader into the IPC stream writer."""
    code = ("import glob, pyarrow.dataset as ds, pyarrow.compute as pc, pyarrow.parquet as pq\n"
            f"files = sorted(p for s in {sources!r} for p in glob.glob(s))\n"
            "dataset = ds.dataset(files, format='parquet')\n")
    if fmt == "parquet":
        return code + f"pq.write_table(dataset.to_table(columns={columns}, filter={where}), {out!r}, compression='zstd')\n"
    return code + f"r = dataset.scanner(columns={columns}, filter={where}).to_reader()\n" + write_reader("r", out)


def read_table(path, fmt):
    """An output file as a pyarrow Table: Parquet, or Arrow IPC as a stream or (Polars) a file."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    if fmt == "parquet":
        return pq.read_table(path)
    with open(path, "rb") as f:
        magic = f.read(6)
    source = pa.memory_map(path)
    reader = pa.ipc.open_file(source) if magic == b"ARROW1" else pa.ipc.open_stream(source)
    return reader.read_all()


def typed_rows(paths, fmt, fields):
    """The rows of typed outputs as tuples of text, the values as the CSV export writes them
    ('' for null; a string held as binary decoded as UTF-8)."""
    text = lambda v: "" if v is None else v.decode() if isinstance(v, bytes) else str(v)
    rows = []
    for path in paths:
        if os.path.getsize(path) == 0:
            continue
        table = read_table(path, fmt)
        columns = [table.column(name).to_pylist() for name in fields]
        rows.extend(tuple(text(v) for v in row) for row in zip(*columns))
    return rows


def row_count(path):
    """The rows a Parquet file's footer holds."""
    import pyarrow.parquet as pq
    return pq.ParquetFile(path).metadata.num_rows
