#!/usr/bin/env bash
# A `cvs update`-like source-tree update (FS2's workload): a clone of wattio's own git
# history, checked out at an early commit (setup, untraced), is updated to a late one with
# `git checkout`, then `git status` walks the tree as `cvs update` would. Cold cache.
# Needs: git.
source "$(dirname "$0")/../capture.sh"
old=cf8318f   # 2026-11-21, the 20th commit
new=e986a43   # 2026-11-23
capture_block 256M "git clone -q --no-local $repo src && git -C src checkout -q $old" \
  -- sh -c "cd src && git checkout -q $new && git status --short | wc -l"
