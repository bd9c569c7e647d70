#!/usr/bin/env bash
# Office-like session on OpenDocument files (see session.py). Needs: python3.
source "$(dirname "$0")/../capture.sh"
# 4 KiB blocks, as the laptop file systems BLTK ran on (mke2fs would give this 256 MiB image
# 1 KiB blocks, and a 1 KiB write cannot be buffered whole by a 4 KiB-page flash cache).
CAPTURE_FS_BLOCK_SIZE=4096
capture_block 256M "python3 $here/session.py setup ." -- python3 "$here/session.py" session .
