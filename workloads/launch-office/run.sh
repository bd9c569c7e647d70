#!/usr/bin/env bash
# Cold launch of LibreOffice (headless) converting a small document to PDF and exiting:
# the large desktop-class program of the launch papers' Word/Eclipse launches.
# Needs: apt-get install --no-install-recommends libreoffice-writer-nogui.
source "$(dirname "$0")/../capture.sh"
work=$(mktemp -d)
printf 'wattio launch capture\n' > "$work/doc.txt"
capture_launch -- soffice --headless -env:UserInstallation=file://$work/profile --convert-to pdf --outdir "$work" "$work/doc.txt"
rm -rf "$work"
