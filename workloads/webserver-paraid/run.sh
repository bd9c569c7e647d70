#!/usr/bin/env bash
# The webserver run (../webserver/web.py: the same 255 MB file set, requests, updates and
# seed) on the file system of PARAID's web server (Sec. 6.1: Apache 2.0.52 on ext2 under
# Linux 2.6.5): a 1 GiB ext2 image mounted with strictatime — 2.6.5 wrote a file's atime at
# every read (relatime came with 2.6.20, the default with 2.6.30) — and, as postmark-20k,
# 2.6.5's write-back thresholds for the paper's 512 MB (10 % / 40 %, restored on exit).
# Needs: apt-get install apache2 httperf.
source "$(dirname "$0")/../capture.sh"
web=$(cd "$here/../webserver" && pwd)/web.py
writeback_as_512mb_server
CAPTURE_FS=ext2 CAPTURE_MOUNT_OPTIONS=strictatime capture_block 1G "python3 $web fileset ." -- python3 "$web" serve .
