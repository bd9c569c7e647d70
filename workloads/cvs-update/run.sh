#!/usr/bin/env bash
# FS2's `cvs -q update` (thesis Sec. 5.5), run for real: a CVS repository and a working copy
# of a real source tree on one large, mostly empty ext4 file system, and after another
# working copy has committed changes, `cvs -q update` in the first. Cold cache.
#
# The tree is wattio's locked dependencies' sources (`cargo vendor`: 178 crates, ~8,700
# files, ~210 MB — about a Linux 2.6 tree's size), deterministic for a given Cargo.lock.
# The upstream change appends one line to every tenth file (sorted by path).
# Needs: apt-get install cvs; cargo with the registry already fetched (it runs offline).
source "$(dirname "$0")/../capture.sh"
setup=$(cat <<SETUP
set -e
cargo vendor --offline --locked -q --manifest-path "$repo/Cargo.toml" import > /dev/null
cvs -Q -d "\$PWD/cvsroot" init
(cd import && cvs -Q -d "\$PWD/../cvsroot" import -kb -m "vendored sources" src vendor start)
rm -rf import
cvs -Q -d "\$PWD/cvsroot" checkout -d work src
cvs -Q -d "\$PWD/cvsroot" checkout -d upstream src
(cd upstream && find . -name CVS -prune -o -type f -print | LC_ALL=C sort | awk 'NR % 10 == 1' \
  | while IFS= read -r f; do echo "/* upstream change */" >> "\$f"; done && cvs -Q commit -m "upstream change")
rm -rf upstream
sync
SETUP
)
capture_block 72G "$setup" -- sh -c "cd work && cvs -q update | wc -l"
