#!/usr/bin/env bash
# Sourced by scripts/test.sh. Exports TEST_DATABASE_URL pointing at a PostgreSQL
# that answers: the one already at TEST_DATABASE_URL (default
# postgres://postgres@127.0.0.1:5432/test), or else a throwaway cluster started
# here with initdb/pg_ctl (installing PostgreSQL from Debian's packages when
# needed) and stopped when the calling shell exits.

: "${TEST_DATABASE_URL:=postgres://postgres@127.0.0.1:5432/test}"
export TEST_DATABASE_URL

pg_answers() { # host port
  if command -v pg_isready >/dev/null 2>&1; then
    pg_isready -q -h "$1" -p "$2" -t 3
  else
    timeout 3 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null
  fi
}

hostport=${TEST_DATABASE_URL#*://}
hostport=${hostport#*@}
hostport=${hostport%%/*}
pg_host=${hostport%%:*}
pg_port=${hostport##*:}
[ "$pg_port" = "$hostport" ] && pg_port=5432

if pg_answers "$pg_host" "$pg_port"; then
  echo "PostgreSQL answers at $pg_host:$pg_port" >&2
else
  echo "Nothing answers at $pg_host:$pg_port: starting a throwaway PostgreSQL cluster" >&2
  pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  if [ -z "$pg_bin" ]; then
    if [ "$(id -u)" -ne 0 ]; then
      echo "PostgreSQL is not installed; run: sudo apt-get install -y postgresql" >&2
      return 1 2>/dev/null || exit 1
    fi
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
    pg_bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
  fi
  pg_dir=$(mktemp -d /tmp/custody-indexer-pg.XXXXXX)
  pg_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  as_owner=()
  if [ "$(id -u)" -eq 0 ]; then
    id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
    chown postgres "$pg_dir"
    as_owner=(runuser -u postgres --)
  fi
  "${as_owner[@]}" "$pg_bin/initdb" -D "$pg_dir/data" -U postgres --auth=trust >/dev/null
  "${as_owner[@]}" "$pg_bin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/log" -w \
    -o "-p $pg_port -k $pg_dir -c listen_addresses=127.0.0.1 -c max_connections=300" start >/dev/null
  "${as_owner[@]}" "$pg_bin/createdb" -h 127.0.0.1 -p "$pg_port" -U postgres test
  export TEST_DATABASE_URL="postgres://postgres@127.0.0.1:$pg_port/test"
  trap '"${as_owner[@]}" "$pg_bin/pg_ctl" -D "$pg_dir/data" -m immediate stop >/dev/null 2>&1; rm -rf "$pg_dir"' EXIT
  echo "throwaway PostgreSQL at 127.0.0.1:$pg_port" >&2
fi
