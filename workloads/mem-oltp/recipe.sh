#!/usr/bin/env bash
# Regenerates trace.parquet: the main-memory traffic of SQLite (the sqlite3 shell, an
# in-memory database) running a seeded TPC-C-shaped transaction mix written by make_sql.py,
# behind the default cache (32 KiB 8-way L1D, 1 MiB 16-way L2, 64 B lines). Stand-in for
# SPECjbb2000 (see README.md). Needs valgrind, sqlite3, python3 and wattio
# (WATTIO=path/to/wattio to choose). MAX_RECORDS (default below) is the truncation rule of
# docs/capture-memory.md.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
wattio=${WATTIO:-wattio}
max=${MAX_RECORDS:-300000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 "$here/make_sql.py" 2000 > "$work/oltp.sql"
echo "input: $(sha256sum "$work/oltp.sql" | cut -c1-64)  oltp.sql" \
  "(sqlite3 $(dpkg-query -W -f='${Version}' sqlite3))"
"$wattio" capture memory --max-records "$max" --out "$here/trace.parquet" -- \
  sqlite3 :memory: ".read $work/oltp.sql" > /dev/null
"$wattio" trace stats "$here/trace.parquet"
