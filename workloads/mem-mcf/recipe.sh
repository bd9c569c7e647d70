#!/usr/bin/env bash
# Regenerates trace.parquet: the main-memory traffic of glpsol (GLPK) solving a seeded
# single-depot vehicle-scheduling problem as a minimum-cost flow by the primal simplex
# (make_min.py 3000 6 1: 6,001 nodes, 26,065 arcs), behind the default cache (32 KiB
# 8-way L1D, 1 MiB 16-way L2, 64 B lines). Stand-in for SPEC CPU2000 181.mcf (network
# simplex on a vehicle-scheduling network). A window in the simplex: the MAX_RECORDS traffic
# records after the first SKIP_RECORDS, with the window clock (docs/capture-memory.md).
# Needs valgrind, glpk-utils, python3 and wattio (WATTIO=path/to/wattio to choose).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
wattio=${WATTIO:-wattio}
skip=${SKIP_RECORDS:-50000000}
max=${MAX_RECORDS:-800000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 "$here/make_min.py" 3000 6 1 > "$work/net.min"
echo "input: $(sha256sum "$work/net.min" | cut -c1-64)  net.min" \
  "(glpk-utils $(dpkg-query -W -f='${Version}' glpk-utils))"
# The solution goes to a scratch file (while this recipe was written, /dev/null became a
# regular file just after a capture that sent glpsol's solution there; cause not confirmed).
(cd "$work" && "$wattio" capture memory --skip-records "$skip" --max-records "$max" \
  --window-clock --out "$here/trace.parquet" -- glpsol --mincost net.min -o sol.txt)
"$wattio" trace stats "$here/trace.parquet"
