#!/usr/bin/env bash
# Regenerates the eleven APP.parquet traces: what leaves a 32 KiB 8-way L1 data cache (fills
# and write-backs with the lines' old and new bytes) for eleven real programs, the stand-ins
# of the NVM-cache reproductions (docs/nvcache.md). The capture's L2 is set equal to its L1,
# so the L2's traffic is exactly the L1's: the stream a last-level cache sees.
# Needs valgrind, bzip2, gzip, xz, zstd, gcc, sqlite3, python3, sort, mawk, perl, bc, tar and
# wattio (WATTIO=path/to/wattio to choose). MAX_RECORDS: the truncation rule of
# docs/capture-memory.md (first N traffic rows per process).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
wattio=${WATTIO:-wattio}
max=${MAX_RECORDS:-100000}
only=${1:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf "$work/input.tar" \
  -C /usr/include valgrind
echo "input.tar: $(sha256sum "$work/input.tar" | cut -c1-64)"
tar -xOf "$work/input.tar" > "$work/text"
git -C "$here" cat-file -p 74b6440f647e6255f6fa9f77eb4b0831ca095560 > "$work/wm_main.c"
python3 "$here/../mem-oltp/make_sql.py" 2000 > "$work/oltp.sql"
cat > "$work/work.py" <<'PY'
import json, random
r = random.Random(7)
rows = [{"id": i, "name": "n%06d" % r.randrange(10**6), "v": [r.random() for _ in range(8)]}
        for i in range(40000)]
text = json.dumps(rows)
back = json.loads(text)
back.sort(key=lambda d: (d["name"], d["id"]))
print(len(text), sum(d["v"][0] for d in back[:100]))
PY
cap() { # name, command... (stdout discarded; bc reads its program from a file and quits)
  local name=$1; shift
  [[ -n "$only" && "$only" != "$name" ]] && return 0
  "$wattio" capture memory --l1-size 32K --l1-ways 8 --l2-size 32K --l2-ways 8 \
    --max-records "$max" --out "$here/$name.parquet" -- "$@" < /dev/null > /dev/null
}
cap bzip2  bzip2 -9 -k -f -c "$work/input.tar"
cap gzip   gzip -9 -c "$work/input.tar"
cap xz     xz -6 -c "$work/input.tar"
cap zstd   zstd -19 -c "$work/input.tar"
cap gcc    gcc -O2 -I "$here/../../tools/valgrind/wattio-mem" -I /usr/include/valgrind -DVGA_amd64=1 \
  -DVGO_linux=1 -DVGP_amd64_linux=1 -DVGPV_amd64_linux_vanilla=1 -c "$work/wm_main.c" -o "$work/wm.o"
cap sqlite sqlite3 :memory: ".read $work/oltp.sql"
cap python /usr/bin/python3 "$work/work.py"
cap sort   sort "$work/text"
cap awk    mawk '{for(i=1;i<=NF;i++)c[$i]++} END{for(w in c)print c[w],w}' "$work/text"
cap perl   perl -pe 's/(\w+)_(\w+)/\U$2\E_$1/g; $_ = reverse $_' "$work/text"
printf 'scale=1200\n4*a(1)\nquit\n' > "$work/pi.bc"
cap bc     bc -l "$work/pi.bc"
for f in "$here"/*.parquet; do echo "$(basename "$f"): $(stat -c %s "$f") bytes"; done
