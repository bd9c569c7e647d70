#!/usr/bin/env bash
# `make rust-test`: every Rust test of the workspace (`cargo test --release`), in two streams
# at once. The live crate's tests mostly wait — on emulated disks' service times, fio's think
# time, servers starting and syncing — while the rest of the workspace computes, so the
# live tests (but the soak) run in the background beside the other crates' tests and then
# the soak, which computes as much as it waits. Everything is built first, so the two cargo
# processes only run tests. The background stream's output is printed when it ends (after
# the foreground's); either failing fails the stage. The live tests count events rather
# than wait fixed times, and pass with both cores kept busy beside them.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --release --workspace -q --no-run
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# The soak's test name: it runs in the foreground stream and is skipped in the background.
soak=slow_mixed_soak
cargo test --release -p wattio-live -q -- --skip "$soak" >"$log" 2>&1 &
live=$!
rc=0
cargo test --release --workspace --exclude wattio-live -q || rc=$?
cargo test --release -p wattio-live --test soak -q -- "$soak" || rc=$?
live_rc=0
wait "$live" || live_rc=$?
echo "--- wattio-live's tests but the soak (run beside the above):"
cat "$log"
if [ "$live_rc" -ne 0 ]; then
  echo "rust-test: wattio-live's tests failed (exit $live_rc)"
  rc=1
fi
exit "$rc"
