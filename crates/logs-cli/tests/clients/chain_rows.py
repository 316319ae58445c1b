"""The records a cursor chain must have delivered, computed by DuckDB from the Parquet files
themselves: every record of one application from a day on, as text.

    python chain_rows.py DATASET_ROOT APPLICATION_ID DATE_SINCE FIELD[,FIELD...]

Prints one JSON array per record: each field as text (`CAST(... AS VARCHAR)`), a null as "".
"""

import datetime
import json
import sys

import duckdb


def main() -> None:
    root, app, since, fields = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4].split(",")
    start = datetime.datetime.combine(datetime.date.fromisoformat(since), datetime.time(), datetime.timezone.utc)
    columns = ", ".join(f"coalesce(CAST({name} AS VARCHAR), '')" for name in fields)
    query = f"""
        SELECT {columns}
        FROM read_parquet('{root}/application_id=*/date=*/*.parquet', hive_partitioning = true, union_by_name = true)
        WHERE application_id = ? AND error_timestamp >= ?
    """
    for row in duckdb.connect().execute(query, [app, int(start.timestamp())]).fetchall():
        print(json.dumps(list(row)))


if __name__ == "__main__":
    main()
