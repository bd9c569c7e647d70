#!/usr/bin/env bash
# Run one stage of `make test` and report its wall time, so a CI log shows where the
# 30-minute budget goes (the README's test command; `.ci/run`).   timed.sh NAME CMD...
name=$1
shift
start=$(date +%s)
rc=0
"$@" || rc=$?
echo "stage $name: $(($(date +%s) - start)) s (exit $rc)"
exit $rc
