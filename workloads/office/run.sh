#!/usr/bin/env bash
# Office-like session on OpenDocument files (see session.py). Needs: python3.
source "$(dirname "$0")/../capture.sh"
capture_block 256M "python3 $here/session.py setup ." -- python3 "$here/session.py" session .
