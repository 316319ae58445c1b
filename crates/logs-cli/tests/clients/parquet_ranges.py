"""Reads a few columns of one row group of a prepared Parquet export through HTTP ranges, as
pyarrow does over fsspec's HTTP file system, and counts the bytes the server sent for it
(crates/logs-cli/tests/formats.rs).

    python parquet_ranges.py BASE_URL TOKEN TARGET ROW_GROUP COLUMN[,COLUMN...]

First the export is asked for until it is prepared (`Prefer: respond-async`, repeated while
the answer is 202) and downloaded whole, directly: the reference. Then pyarrow opens it
through fsspec's `HTTPFileSystem` (with the `Authorization` header, and no read-ahead
cache: `cache_type="none"`), reached through a counting proxy on loopback, reads the footer
and the columns of ROW_GROUP, and nothing more.

Prints one JSON object: `size` (the file's bytes), `row_groups`, `rows` (of the file),
`served` (the bytes the server sent through the proxy, heads included), `requests` (each
request's method and `Range` header), `read_rows` (the rows read through ranges) and `equal`
(whether they are those of the same columns and row group of the whole file).
"""

import io
import json
import os
import socket
import sys
import threading
import time

import fsspec
import pyarrow.parquet
import requests


class CountingProxy:
    """A TCP proxy on loopback to `upstream` that counts the bytes coming back and records
    the heads of the requests going out (GETs and HEADs: heads only)."""

    def __init__(self, upstream: tuple):
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.served = 0
        self.heads = []
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self) -> None:
        while True:
            client, _ = self.listener.accept()
            server = socket.create_connection(self.upstream)
            threading.Thread(target=self.pipe, args=(server, client, True), daemon=True).start()
            threading.Thread(target=self.pipe, args=(client, server, False), daemon=True).start()

    def pipe(self, source: socket.socket, sink: socket.socket, counted: bool) -> None:
        pending = b""
        try:
            while chunk := source.recv(1 << 16):
                # Counted before it is passed on: whatever the client has read is counted.
                with self.lock:
                    if counted:
                        self.served += len(chunk)
                    else:
                        pending += chunk
                        while b"\r\n\r\n" in pending:
                            head, pending = pending.split(b"\r\n\r\n", 1)
                            self.heads.append(head.decode("latin-1"))
                sink.sendall(chunk)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def requests(self) -> list:
        """Each request as `METHOD Range` (`-` without one)."""
        out = []
        for head in self.heads:
            lines = head.split("\r\n")
            ranges = [line.split(":", 1)[1].strip() for line in lines[1:] if line.lower().startswith("range:")]
            out.append(f"{lines[0].split(' ')[0]} {ranges[0] if ranges else '-'}")
        return out


def prepared_body(url: str, token: str) -> bytes:
    headers = {"Authorization": f"OAuth {token}", "Prefer": "respond-async"}
    deadline = time.monotonic() + 300
    while True:
        response = requests.get(url, headers=headers, timeout=120)
        if response.status_code == 200:
            if response.headers.get("Accept-Ranges") != "bytes":
                sys.exit(f"not a prepared export: {dict(response.headers)}")
            return response.content
        if response.status_code != 202 or time.monotonic() > deadline:
            sys.exit(f"{response.status_code} {response.text[:500]}")
        time.sleep(0.2)


def main() -> None:
    base, token, target, row_group, columns = sys.argv[1:6]
    row_group, columns = int(row_group), columns.split(",")
    whole = prepared_body(f"{base}/logs/v1/export/{target}", token)
    reference = pyarrow.parquet.ParquetFile(io.BytesIO(whole))

    host, port = base.removeprefix("http://").rsplit(":", 1)
    proxy = CountingProxy((host, int(port)))
    fs = fsspec.filesystem("http", headers={"Authorization": f"OAuth {token}"})
    # No read-ahead cache: by default fsspec reads 5 MiB beyond each read.
    url = f"http://127.0.0.1:{proxy.port}/logs/v1/export/{target}"
    with fs.open(url, "rb", cache_type="none") as file:
        remote = pyarrow.parquet.ParquetFile(file)
        table = remote.read_row_group(row_group, columns=columns)
        row_groups, rows = remote.metadata.num_row_groups, remote.metadata.num_rows
    with proxy.lock:
        served = proxy.served
    expected = reference.read_row_group(row_group, columns=columns)
    report = {
        "size": len(whole),
        "row_groups": row_groups,
        "rows": rows,
        "served": served,
        "requests": proxy.requests(),
        "read_rows": table.num_rows,
        "equal": table.equals(expected),
    }
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
    # Without Python's teardown: pyarrow's C++ threads and fsspec's event-loop thread, torn
    # down in the wrong order, once aborted the process after its report was printed
    # ("terminate called without an active exception", SIGABRT).
    os._exit(0)
