#!/usr/bin/env bash
# apache2 serving a Zipf-popular 255 MB file set to httperf: 95,000 requests, 98 % reads.
# Needs: apt-get install apache2 httperf. Cold cache; about 100 s of load.
source "$(dirname "$0")/../capture.sh"
capture_block 1G "python3 $here/web.py fileset ." -- python3 "$here/web.py" serve .
