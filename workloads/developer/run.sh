#!/usr/bin/env bash
# BLTK-Developer-like: edit + incremental-compile cycles on DiskSim 4.0's sources, with
# human-like idle gaps (see session.py). Needs: gcc, make, bison, flex and the DiskSim
# tarball in ../shared/disksim-src (the setup unpacks and builds it once, untraced).
source "$(dirname "$0")/../capture.sh"
# 4 KiB blocks, as the laptop file systems BLTK ran on (mke2fs would give this 256 MiB image
# 1 KiB blocks, and a 1 KiB write cannot be buffered whole by a 4 KiB-page flash cache).
CAPTURE_FS_BLOCK_SIZE=4096
tarball=${DISKSIM_TARBALL:-$repo/../shared/disksim-src/disksim-4.0-wd.tar.gz}
[ -f "$tarball" ] || tarball=/work/shared/disksim-src/disksim-4.0-wd.tar.gz
capture_block 256M "tar xzf $tarball && make -C disksim-4.0-wd -j1 >/dev/null 2>&1" \
  -- python3 "$here/session.py" disksim-4.0-wd
