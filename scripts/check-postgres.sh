#!/usr/bin/env bash
# Fails at once, with the way to fix it, when PostgreSQL is not reachable.
# Usage: check-postgres.sh [URL]   (default: PIN_TEST_DATABASE_URL, else the local server)
set -euo pipefail
url="${1:-${PIN_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}}"
if command -v pg_isready >/dev/null 2>&1; then
  if pg_isready -q -d "$url" -t 3; then exit 0; fi
else
  # host and port of the URL, as pg_isready would read them
  hostport="${url#*://}"; hostport="${hostport#*@}"; hostport="${hostport%%[/?]*}"
  host="${hostport%:*}"; port="${hostport##*:}"
  [ "$host" = "$hostport" ] && port=5432
  if (exec 3<>"/dev/tcp/${host:-127.0.0.1}/$port") 2>/dev/null; then exit 0; fi
fi
cat >&2 <<MSG
PostgreSQL is not reachable at ${url}.
Start it, then run the command again:
  - Debian/Ubuntu with the cluster installed:  pg_ctlcluster --skip-systemctl-redirect 15 main start
  - with Docker (this repository's compose file, on port 55432):
      PIN_VERSION=dev docker compose up -d postgres
      export PIN_TEST_DATABASE_URL='postgres://postgres@127.0.0.1:55432/postgres?sslmode=disable'
      export PIN_DATABASE_URL='postgres://postgres@127.0.0.1:55432/pin?sslmode=disable'
  - or point PIN_TEST_DATABASE_URL (tests) / PIN_DATABASE_URL (dev) at a PostgreSQL 15+ server.
MSG
exit 1
