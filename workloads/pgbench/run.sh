#!/usr/bin/env bash
# PostgreSQL under pgbench's TPC-B-like load, as file-level system calls of the server and
# the client: a scale-5 database (setup, untraced), then 2 clients for 15 s.
# Needs: apt-get install postgresql strace.
source "$(dirname "$0")/../capture.sh"
pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
data=$(mktemp -d /var/tmp/wattio-pg.XXXXXX)
chown postgres "$data"
trap 'su postgres -c "$pgbin/pg_ctl -D $data -w stop" >/dev/null 2>&1; rm -rf "$data"' EXIT
opts="-k /tmp -p 5499 -c listen_addresses="
su postgres -c "$pgbin/initdb -D $data -A trust >/dev/null && $pgbin/pg_ctl -D $data -o '$opts' -w start >/dev/null && $pgbin/pgbench -h /tmp -p 5499 -i -s 5 -q postgres && $pgbin/pg_ctl -D $data -w stop >/dev/null"
capture_files -- su postgres -c "$pgbin/pg_ctl -D $data -o '$opts' -w start >/dev/null && $pgbin/pgbench -h /tmp -p 5499 -c 2 -j 2 -T 15 postgres; $pgbin/pg_ctl -D $data -w stop >/dev/null"
