#!/usr/bin/env bash
# The webserver run (../webserver/web.py: the same 255 MB file set, requests, updates and
# seed) on the file system of PARAID's web server (Sec. 6.1: Apache 2.0.52 on ext2 under
# Linux 2.6.5): a 1 GiB ext2 image mounted with strictatime — 2.6.5 wrote a file's atime at
# every read (relatime came with 2.6.20, the default with 2.6.30) — and, as postmark-20k,
# 2.6.5's write-back thresholds for the paper's 512 MB (10 % / 40 %, restored on exit).
# Needs: apt-get install apache2 httperf.
source "$(dirname "$0")/../capture.sh"
web=$(cd "$here/../webserver" && pwd)/web.py
old_bg=$(sysctl -n vm.dirty_background_bytes) old_bgr=$(sysctl -n vm.dirty_background_ratio)
old_d=$(sysctl -n vm.dirty_bytes) old_dr=$(sysctl -n vm.dirty_ratio)
capture_cleanup() {
  if [ "$old_bg" != 0 ]; then sysctl -q vm.dirty_background_bytes="$old_bg"; else sysctl -q vm.dirty_background_ratio="$old_bgr"; fi
  if [ "$old_d" != 0 ]; then sysctl -q vm.dirty_bytes="$old_d"; else sysctl -q vm.dirty_ratio="$old_dr"; fi
}
sysctl -q vm.dirty_background_bytes=$((512 * 1048576 / 10)) vm.dirty_bytes=$((512 * 1048576 * 4 / 10))
CAPTURE_FS=ext2 CAPTURE_MOUNT_OPTIONS=strictatime capture_block 1G "python3 $web fileset ." -- python3 "$web" serve .
