#!/usr/bin/env bash
# PostMark (Debian's postmark 1.51) on a fresh 512 MiB ext4 image: 2,000 files of
# 0.5-9.77 KB in 10 directories, 50,000 transactions (read/append and create/delete pairs),
# the read/write and create/delete biases at PostMark's defaults (5 of 10). Cold cache.
# Needs: apt-get install postmark.
source "$(dirname "$0")/../capture.sh"
capture_block 512M "printf 'set location .\nset number 2000\nset transactions 50000\nset subdirectories 10\nset seed 42\nrun\nquit\n' > /tmp/wattio-postmark.cfg" \
  -- postmark /tmp/wattio-postmark.cfg
