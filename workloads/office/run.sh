#!/usr/bin/env bash
# BLTK's Office workload on LibreOffice (see session.py): Writer, Calc and Draw edited with
# BLTK's keystroke delays, each round given BLTK's 720 s, two rounds from a cold cache.
# Needs: apt-get install --no-install-recommends libreoffice-writer-nogui
#        libreoffice-calc-nogui libreoffice-draw-nogui python3-uno  (about 30 min to capture)
source "$(dirname "$0")/../capture.sh"
# 4 KiB blocks, as the laptop file systems BLTK ran on (mke2fs would give a small image 1 KiB
# blocks, and a 1 KiB write cannot be buffered whole by a 4 KiB-page flash cache). 1 GiB holds
# the suite (245 MB), its profile and the documents.
CAPTURE_FS_BLOCK_SIZE=4096
# python3-uno is Debian's, for Debian's python3 (a virtualenv's python3 cannot import it).
capture_block 1G "/usr/bin/python3 $here/session.py setup ." -- /usr/bin/python3 "$here/session.py" session .
