#!/usr/bin/env bash
# PostMark as PARAID's Sec. 8 ran it (Fig. 15: "20K files and 100K transactions"), at the
# block level: Debian's postmark with 20,000 files of 0.5-9.77 KB (PostMark's default sizes)
# in 10 directories, 100,000 transactions (biases at PostMark's defaults), on a fresh 2 GiB
# ext2 image (the file system of the paper's server) from a cold cache.
# The paper's server had 512 MB of RAM under Linux 2.6.5, whose write-back started at 10 %
# and throttled writers at 40 % of memory; this machine has 23.5 GiB, where PostMark's
# ~100 MB file set would never leave the page cache. So the recipe sets vm.dirty_background_bytes
# and vm.dirty_bytes to 10 % and 40 % of 512 MiB for the capture (restored on exit).
# Needs: apt-get install postmark.
source "$(dirname "$0")/../capture.sh"
writeback_as_512mb_server
CAPTURE_FS=ext2 capture_block 2G "printf 'set location .\nset number 20000\nset transactions 100000\nset subdirectories 10\nset seed 42\nrun\nquit\n' > /tmp/wattio-postmark-20k.cfg" \
  -- postmark /tmp/wattio-postmark-20k.cfg
