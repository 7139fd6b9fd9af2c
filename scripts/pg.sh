#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for fairschedpg's tests.
#
#   scripts/pg.sh start DIR   create a cluster in DIR (new or empty) and start it;
#                             prints the export line the tests read
#   scripts/pg.sh stop DIR    stop it (remove DIR afterwards yourself)
#   scripts/pg.sh restart DIR stop it (fast: connections are cut) and start it again
#
# The server listens on 127.0.0.1 only, on a free port, with its unix socket
# in DIR, fsync on, and a password generated for the cluster (scram); DIR/env
# holds the same export line as start prints. Run as root, the cluster is
# owned by and run as the postgres user (the server refuses to run as root);
# otherwise as the current user. The binaries are PostgreSQL 15's, from
# /usr/lib/postgresql/15/bin or `pg_config --bindir`, else the newest
# version under /usr/lib/postgresql.
set -euo pipefail

usage() {
	echo "usage: $0 start DIR | stop DIR | restart DIR" >&2
	exit 2
}
[ $# -eq 2 ] || usage
cmd=$1
dir=$2

# PostgreSQL 15's binaries, else pg_config's, else the newest Debian has
# installed: the store needs nothing past 15.
bindir=/usr/lib/postgresql/15/bin
if [ ! -x "$bindir/initdb" ] && command -v pg_config >/dev/null; then
	bindir=$(pg_config --bindir)
fi
if [ ! -x "$bindir/initdb" ]; then
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
		if [ -x "$d/initdb" ]; then
			bindir=$d
			break
		fi
	done
fi
if [ ! -x "$bindir/initdb" ] || [ ! -x "$bindir/pg_ctl" ]; then
	echo "$0: no PostgreSQL server binaries (initdb, pg_ctl) in /usr/lib/postgresql/*/bin or pg_config --bindir;" >&2
	echo "on Debian: apt-get install postgresql" >&2
	exit 1
fi

# as runs a command as the cluster's owner.
if [ "$(id -u)" -eq 0 ]; then
	owner=postgres
	as() { runuser -u postgres -- "$@"; }
else
	owner=$(id -un)
	as() { "$@"; }
fi

case $cmd in
start)
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	if [ -e "$dir/data" ]; then
		echo "$0: $dir/data exists: start makes a new cluster; stop it and remove $dir first" >&2
		exit 1
	fi
	if [ "$owner" != "$(id -un)" ]; then
		chown "$owner" "$dir"
		if ! as test -w "$dir"; then
			echo "$0: the user $owner cannot write $dir (is a parent directory closed to it?)" >&2
			exit 1
		fi
	fi
	password=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
	as sh -c "umask 077 && printf '%s\n' '$password' >'$dir/password'"
	as "$bindir/initdb" -D "$dir/data" -U "$owner" --pwfile="$dir/password" \
		--auth-local=trust --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 || {
		cat "$dir/initdb.log" >&2
		exit 1
	}
	# A port nothing listens on; the server's own bind settles a race.
	started=
	for _ in $(seq 1 20); do
		port=$((20000 + RANDOM % 20000))
		if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			continue
		fi
		cat >"$dir/port.conf" <<-EOF
			listen_addresses = '127.0.0.1'
			port = $port
			unix_socket_directories = '$dir'
			fsync = on
			max_connections = 200
		EOF
		as sh -c "cat '$dir/port.conf' >'$dir/data/postgresql.auto.conf'"
		if as "$bindir/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 start >/dev/null; then
			started=1
			break
		fi
	done
	rm -f "$dir/port.conf"
	if [ -z "$started" ]; then
		echo "$0: the server did not start; its log:" >&2
		cat "$dir/postgres.log" >&2 || true
		exit 1
	fi
	line="export FAIRSCHED_PG_DSN=postgres://$owner:$password@127.0.0.1:$port/postgres?sslmode=disable"
	(umask 077 && echo "$line" >"$dir/env")
	echo "$line"
	;;
stop)
	dir=$(cd "$dir" && pwd)
	as "$bindir/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
	;;
restart)
	dir=$(cd "$dir" && pwd)
	as "$bindir/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -m fast -w -t 60 restart >/dev/null
	;;
*)
	usage
	;;
esac
