#!/usr/bin/env bash
# PostMark (Debian's postmark 1.51) as file-level system calls: 2,000 files of 0.5-9.77 KB
# in 10 directories, 10,000 transactions (read/append and create/delete pairs, biases at
# PostMark's defaults), in a fresh directory under the scratch folder, page cache warm.
# Fewer transactions than workloads/postmark (50,000) keep the trace's open/close events
# under the library's 5 MB per trace. Needs: apt-get install postmark strace.
source "$(dirname "$0")/../capture.sh"
dir=$(mktemp -d "$scratch/wattio-postmark-files.XXXXXX")
trap 'rm -rf "$dir"' EXIT
printf 'set location %s\nset number 2000\nset transactions 10000\nset subdirectories 10\nset seed 42\nrun\nquit\n' "$dir" > "$dir.cfg"
trap 'rm -rf "$dir" "$dir.cfg"' EXIT
capture_files -- postmark "$dir.cfg"
