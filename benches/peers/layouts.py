"""Layouts of the benchmark's rows as other writers leave them (see docs/benchmarks.md)."""
import glob
import os
import shutil

# A streaming ingester's flush windows: rows that arrive on their own date are flushed once an
# hour; late rows (arriving on a later date than their folder's) every 40 minutes, as tiny files.
ON_TIME_WINDOW_S = 3600
LATE_WINDOW_S = 2400
STREAMING_ROW_GROUP = 8192


def write_streaming(main, target):
    """The rows of the dataset at `main` as a streaming ingester (Kafka Connect, Vector,
    Firehose) leaves them: in each date folder, one file per arrival window, in arrival order,
    written by pyarrow with snappy, 8 Ki-row groups, statistics, no page index and no bloom
    filters."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    staging = target + ".tmp"
    shutil.rmtree(staging, ignore_errors=True)
    for folder in sorted(glob.glob(os.path.join(main, "*", "date=*"))):
        table = pa.concat_tables(pq.read_table(p) for p in sorted(glob.glob(os.path.join(folder, "*.parquet"))))
        received = table.column("error_receive_timestamp")
        day = pc.divide(table.column("error_timestamp"), 86_400)
        late = pc.greater(pc.divide(received, 86_400), day)
        window = pc.if_else(late, pc.multiply(pc.divide(received, LATE_WINDOW_S), LATE_WINDOW_S),
                            pc.multiply(pc.divide(received, ON_TIME_WINDOW_S), ON_TIME_WINDOW_S))
        table = table.append_column("__window", window).sort_by([("__window", "ascending"),
                                                                   ("error_receive_timestamp", "ascending")])
        windows = table.column("__window").to_numpy()
        table = table.drop_columns(["__window"])
        out = os.path.join(staging, os.path.relpath(folder, main))
        os.makedirs(out, exist_ok=True)
        import numpy as np
        bounds = [0, *(np.flatnonzero(np.diff(windows)) + 1).tolist(), len(windows)]
        for start, end in zip(bounds, bounds[1:]):
            pq.write_table(table.slice(start, end - start), os.path.join(out, f"flush-{windows[start]}.parquet"),
                           row_group_size=STREAMING_ROW_GROUP, compression="snappy", write_statistics=True,
                           write_page_index=False)
        del table
    os.rename(staging, target)


if __name__ == "__main__":
    import sys
    write_streaming(sys.argv[1], sys.argv[2])
