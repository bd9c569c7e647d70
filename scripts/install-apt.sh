#!/usr/bin/env bash
# Install the Debian packages listed in scripts/apt-packages.txt that are missing.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
missing=()
while read -r pkg; do
  [[ -z "$pkg" || "$pkg" == \#* ]] && continue
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done < "$here/apt-packages.txt"
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "installing Debian packages: ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
pins=()
for pkg in "${missing[@]}"; do
  if [ "$pkg" = qemu-system-x86 ]; then
    # qemu-system-x86 needs qemu-utils of its own version. A machine may carry a newer
    # qemu-utils from backports, which apt would silently *remove* to satisfy that: install
    # the pair from the same release instead (a downgrade of qemu-utils, not a removal).
    v=$(apt-cache madison qemu-utils | awk 'NR == 1 { print $3 }')
    [ -n "$v" ] && pins+=("qemu-utils=$v")
  fi
done
# Refuse any plan that removes a package: a removal here would break tests silently.
plan=$(apt-get install -s -y --no-install-recommends --allow-downgrades "${missing[@]}" "${pins[@]}")
if grep -q '^Remv ' <<<"$plan"; then
  echo "install-apt.sh: apt would remove packages to install ${missing[*]}:" >&2
  grep '^Remv ' <<<"$plan" >&2
  exit 1
fi
$sudo apt-get install -y -qq --no-install-recommends --allow-downgrades "${missing[@]}" "${pins[@]}"
