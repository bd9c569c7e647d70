#!/usr/bin/env bash
# BLTK-Developer-like: edit + incremental-compile cycles on DiskSim 4.0's sources, with
# human-like idle gaps (see session.py). Needs: gcc, make, bison, flex and the DiskSim
# tarball in ../shared/disksim-src (the setup unpacks and builds it once, untraced).
source "$(dirname "$0")/../capture.sh"
tarball=${DISKSIM_TARBALL:-$repo/../shared/disksim-src/disksim-4.0-wd.tar.gz}
[ -f "$tarball" ] || tarball=/work/shared/disksim-src/disksim-4.0-wd.tar.gz
capture_block 256M "tar xzf $tarball && make -C disksim-4.0-wd -j1 >/dev/null 2>&1" \
  -- python3 "$here/session.py" disksim-4.0-wd
