#!/usr/bin/env bash
# Regenerates trace.parquet: the main-memory traffic of art.py, an ART 2-style neural
# network in NumPy (100 inputs, 400 F2 nodes of 1,000 features: a 3.2 MB weight matrix
# streamed once an input), behind the default cache (32 KiB 8-way L1D, 1 MiB 16-way L2,
# 64 B lines). Stand-in for SPEC CPU2000 179.art. A window in the recognition loop: the
# MAX_RECORDS traffic records after the first SKIP_RECORDS (past the interpreter's start and
# NumPy's import), with the window clock (docs/capture-memory.md). Needs valgrind, a python3
# with NumPy (PYTHON=...; the project's .venv has it) and wattio (WATTIO=...).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
wattio=${WATTIO:-wattio}
python=${PYTHON:-python3}
skip=${SKIP_RECORDS:-2000000}
max=${MAX_RECORDS:-2500000}
echo "input: art.py 100 400 1000 1 (python $("$python" -c 'import sys, numpy; print(sys.version.split()[0], "numpy", numpy.__version__)'))"
OPENBLAS_NUM_THREADS=1 "$wattio" capture memory --skip-records "$skip" --max-records "$max" \
  --window-clock --out "$here/trace.parquet" -- "$python" "$here/art.py" 100 400 1000 1
"$wattio" trace stats "$here/trace.parquet"
