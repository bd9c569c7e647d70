#!/usr/bin/env bash
# TPC-H-like decision support on PostgreSQL, as file-level system calls of the server and
# the client: TPC-H's lineitem, orders and customer tables filled by SQL (generate_series,
# a deterministic hash for the values; setup untraced), then five queries of TPC-H's
# shapes (Q1 pricing summary, Q6 forecast revenue, Q3 shipping priority, Q12 shipping
# modes, Q14 promotion effect) with a 16 MB shared buffer pool, so table pages are read
# through the OS buffer cache with pread. Needs: apt-get install postgresql strace.
source "$(dirname "$0")/../capture.sh"
pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
data=$(mktemp -d /var/tmp/wattio-tpch.XXXXXX)
sql=$(mktemp -d /var/tmp/wattio-tpch-sql.XXXXXX)
chown postgres "$data" "$sql"
trap 'su postgres -c "$pgbin/pg_ctl -D $data -w stop" >/dev/null 2>&1 || true; rm -rf "$data" "$sql"' EXIT
opts="-k /tmp -p 5498 -c listen_addresses= -c shared_buffers=16MB"
cp "$(dirname "$0")/schema.sql" "$(dirname "$0")/queries.sql" "$sql/"
chmod a+r "$sql"/*.sql
psql="$pgbin/psql -h /tmp -p 5498 -q -X -v ON_ERROR_STOP=1 postgres"
su postgres -c "$pgbin/initdb -D $data -A trust >/dev/null && $pgbin/pg_ctl -D $data -o '$opts' -w start >/dev/null && $psql -f $sql/schema.sql && $pgbin/pg_ctl -D $data -w stop >/dev/null"
capture_files -- su postgres -c "$pgbin/pg_ctl -D $data -o '$opts' -w start >/dev/null && $psql -f $sql/queries.sql >/dev/null; $pgbin/pg_ctl -D $data -w stop >/dev/null"
