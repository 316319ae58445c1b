"""The records the reference loader (examples/incremental_loader.py) stored, and its cursor.

    python sqlite_rows.py DB_PATH

Prints one JSON array per row of the table `errors` (each value as stored, text), then a last
line `{"cursor": ...}` (null when none is stored).
"""

import json
import sqlite3
import sys


def main() -> None:
    db = sqlite3.connect(sys.argv[1])
    for row in db.execute("SELECT * FROM errors"):
        print(json.dumps(list(row)))
    cursor = db.execute("SELECT cursor FROM sync_cursor").fetchone()
    print(json.dumps({"cursor": cursor[0] if cursor else None}))


if __name__ == "__main__":
    main()
