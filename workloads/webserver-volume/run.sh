#!/usr/bin/env bash
# FS2's SURGE / TPC-W stand-in: the webserver workload (../webserver/web.py, the same file set
# and request plan) on a file system the size of the thesis's disk, the site's directories at
# its top level, where ext4 spreads them over the volume. Needs: apt-get install apache2 httperf.
# Cold cache; about 100 s of load.
source "$(dirname "$0")/../capture.sh"
export WEB_DOCROOT=.
web="$here/../webserver/web.py"
capture_block 72G "python3 $web fileset ." -- python3 "$web" serve .
