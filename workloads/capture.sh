# Sourced by every workloads/NAME/run.sh: `capture_block IMAGE_SIZE SETUP -- COMMAND…` runs
# `wattio capture block` on a fresh scratch image (created, used, deleted; file system
# $CAPTURE_FS, default ext4; blocks of $CAPTURE_FS_BLOCK_SIZE bytes when set, else mkfs's
# choice, which for ext4 under 512 MB is 1 KiB; mounted with $CAPTURE_MOUNT_OPTIONS when set), `capture_files -- COMMAND…` runs `wattio capture files`,
# `capture_launch -- COMMAND…` `wattio capture launch`. Each writes NAME/trace.parquet and
# records how and where it was captured and its `wattio trace stats` in NAME/README.md
# between the `<!-- capture -->` markers. Needs root.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)
name=$(basename "$here")
repo=$(cd "$here/../.." && pwd)
if [ -z "${WATTIO:-}" ]; then
  if [ -x "$repo/.venv/bin/wattio" ]; then WATTIO=$repo/.venv/bin/wattio; else WATTIO=wattio; fi
fi
scratch=${WATTIO_SCRATCH:-/var/tmp}

# Linux 2.6.5's write-back thresholds for PARAID's 512 MB server: vm.dirty_background_bytes
# and vm.dirty_bytes at 10 % and 40 % of 512 MiB for the capture, the machine's own settings
# restored on exit (as the recipe's capture_cleanup, which capture_block's exit trap runs).
writeback_as_512mb_server() {
  old_bg=$(sysctl -n vm.dirty_background_bytes) old_bgr=$(sysctl -n vm.dirty_background_ratio)
  old_d=$(sysctl -n vm.dirty_bytes) old_dr=$(sysctl -n vm.dirty_ratio)
  capture_cleanup() {
    if [ "$old_bg" != 0 ]; then sysctl -q vm.dirty_background_bytes="$old_bg"; else sysctl -q vm.dirty_background_ratio="$old_bgr"; fi
    if [ "$old_d" != 0 ]; then sysctl -q vm.dirty_bytes="$old_d"; else sysctl -q vm.dirty_ratio="$old_dr"; fi
  }
  sysctl -q vm.dirty_background_bytes=$((512 * 1048576 / 10)) vm.dirty_bytes=$((512 * 1048576 * 4 / 10))
}

capture_block() {
  local size=$1 setup=$2
  shift 3 # SIZE SETUP --
  local fs=${CAPTURE_FS:-ext4}
  local bs=()
  [ -n "${CAPTURE_FS_BLOCK_SIZE:-}" ] && bs=(--fs-block-size "$CAPTURE_FS_BLOCK_SIZE")
  [ -n "${CAPTURE_MOUNT_OPTIONS:-}" ] && bs+=(--mount-options "$CAPTURE_MOUNT_OPTIONS")
  img="$scratch/wattio-workload-$name.img"
  rm -f "$img"
  # A recipe's own clean-up (a function named capture_cleanup) runs on exit too.
  trap 'rm -f "$img"; if declare -F capture_cleanup > /dev/null; then capture_cleanup; fi' EXIT
  local start
  start=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  "$WATTIO" capture block --image "$img" --size "$size" --fs "$fs" "${bs[@]}" --setup "$setup" --drop-caches \
    --out "$here/trace.parquet" -- "$@"
  record "$start" "; image: $size $fs${CAPTURE_FS_BLOCK_SIZE:+ (${CAPTURE_FS_BLOCK_SIZE}-byte blocks)}${CAPTURE_MOUNT_OPTIONS:+ mounted -o $CAPTURE_MOUNT_OPTIONS} on a loop device (direct I/O) backed by $(df --output=source "$scratch" | tail -1)"
}

capture_files() {
  shift # --
  local start
  start=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  "$WATTIO" capture files --out "$here/trace.parquet" -- "$@"
  record "$start" "; file-level calls through strace"
}

capture_launch() {
  shift # --
  local start
  start=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  "$WATTIO" capture launch --out "$here/trace.parquet" -- "$@"
  record "$start" "; a cold launch (page cache dropped) from the root file system on $(findmnt -n -o SOURCE /)"
}

record() {
  local start=$1 extra=$2 stats machine
  stats=$("$WATTIO" trace stats "$here/trace.parquet")
  machine="$(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')), $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo) RAM, Linux $(uname -r), $(. /etc/os-release && echo "$PRETTY_NAME")$extra"
  printf '%s\n' "$stats" > "$here/.stats.txt"
  python3 - "$here/README.md" "$start" "$machine" "$here/.stats.txt" "$(du -h "$here/trace.parquet" | cut -f1)" <<'PY'
import sys
readme, start, machine, stats_file, size = sys.argv[1:]
stats = open(stats_file).read()
text = open(readme).read()
head, _, rest = text.partition("<!-- capture -->")
_, _, tail = rest.partition("<!-- /capture -->")
block = (f"<!-- capture -->\nCaptured {start} on {machine}; trace.parquet is {size}.\n\n"
         f"`wattio trace stats trace.parquet`:\n\n```text\n{stats.rstrip()}\n```\n<!-- /capture -->")
open(readme, "w").write(head + block + tail)
PY
  rm -f "$here/.stats.txt"
}
