#!/usr/bin/env bash
# Regenerates trace.parquet: the main-memory traffic of gcc -O2 compiling a real C file (the
# wattio-mem tool's own wm_main.c, some 600 lines including Valgrind's large VEX IR headers)
# — the driver, cc1 and as, each a process of the trace — behind the default cache
# (32 KiB 8-way L1D, 1 MiB 16-way L2, 64 B lines). Stand-in for SPEC CPU2000 176.gcc.
# Needs valgrind, gcc and wattio (WATTIO=path/to/wattio to choose). MAX_RECORDS (default
# below) is the truncation rule of docs/capture-memory.md.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
wattio=${WATTIO:-wattio}
max=${MAX_RECORDS:-250000}
tooldir="$here/../../tools/valgrind/wattio-mem"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The input is pinned: wm_main.c as captured (git blob 74b6440f647e6255f6fa9f77eb4b0831ca095560), not today's file.
src="$work/wm_main.c"
git -C "$here" cat-file -p 74b6440f647e6255f6fa9f77eb4b0831ca095560 > "$src"
echo "input: $(sha256sum "$src" | cut -c1-64)  wm_main.c (gcc $(dpkg-query -W -f='${Version}' gcc-12))"
"$wattio" capture memory --max-records "$max" --out "$here/trace.parquet" -- \
  gcc -O2 -I "$tooldir" -I /usr/include/valgrind -DVGA_amd64=1 -DVGO_linux=1 \
  -DVGP_amd64_linux=1 -DVGPV_amd64_linux_vanilla=1 -c "$src" -o "$work/wm_main.o"
"$wattio" trace stats "$here/trace.parquet"
