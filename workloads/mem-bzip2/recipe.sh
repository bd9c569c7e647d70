#!/usr/bin/env bash
# Regenerates trace.parquet: the main-memory traffic of bzip2 -9 compressing a fixed source
# tarball (the valgrind package's headers, packed reproducibly), behind the default cache
# (32 KiB 8-way L1D, 1 MiB 16-way L2, 64 B lines). Stand-in for SPEC CPU2000 256.bzip2
# (input.source). Needs valgrind, bzip2, tar and wattio (WATTIO=path/to/wattio to choose).
# MAX_RECORDS (default below) is the truncation rule of docs/capture-memory.md.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
wattio=${WATTIO:-wattio}
max=${MAX_RECORDS:-400000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf "$work/input.tar" \
  -C /usr/include valgrind
echo "input: $(sha256sum "$work/input.tar" | cut -c1-64)  $(stat -c %s "$work/input.tar") bytes" \
  "(valgrind $(dpkg-query -W -f='${Version}' valgrind))"
"$wattio" capture memory --max-records "$max" --out "$here/trace.parquet" -- \
  bzip2 -9 -k -f "$work/input.tar"
"$wattio" trace stats "$here/trace.parquet"
