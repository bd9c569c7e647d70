#!/usr/bin/env bash
# glimpse indexing a source tree (Python 3.11's standard library, 54 MB) and then searching
# it, as file-level system calls. Needs: apt-get install glimpse strace.
source "$(dirname "$0")/../capture.sh"
idx=$(mktemp -d)
capture_files -- sh -c "glimpseindex -H $idx -o /usr/lib/python3.11 >/dev/null && for w in socket deadlock 'def __init__' energy checksum; do glimpse -y -H $idx -c \"\$w\" >/dev/null; done"
rm -rf "$idx"
