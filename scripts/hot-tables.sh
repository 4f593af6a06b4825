#!/usr/bin/env bash
# The hot-table measurement of docs/performance.md: runs
# `pin dev` (relay, embedded broker, boost projection) on a database of its
# own, offers purchases and cancellations at a steady rate on a fixed pool of
# targets, waits until every event is applied, stops the server, and prints
# per table the bytes on disk, live and dead tuples and updates (HOT or not),
# then the same after one VACUUM.
#
# Usage: scripts/hot-tables.sh DATABASE
#   DATABASE must not exist; it is created, and dropped at the end unless
#   PIN_HOT_KEEP=1.
# Environment:
#   PIN_HOT_RATE (80)  PIN_HOT_DURATION (2m)  PIN_HOT_TARGETS (300)
#   PIN_HOT_CANCEL_AFTER (50, per client of 8)  PIN_HOT_PIN_BINARY (pin built here)
#   PIN_HTTP_ADDR (127.0.0.1:18480)  PIN_DEV_KAFKA_ADDR (127.0.0.1:19480)
#   PIN_HOT_SERVER (postgres://postgres@127.0.0.1:5432)
set -euo pipefail
cd "$(dirname "$0")/.."
db=${1:?usage: scripts/hot-tables.sh DATABASE}
server=${PIN_HOT_SERVER:-postgres://postgres@127.0.0.1:5432}
http=${PIN_HTTP_ADDR:-127.0.0.1:18480}
kafka=${PIN_DEV_KAFKA_ADDR:-127.0.0.1:19480}
dburl="$server/$db?sslmode=disable"
tmp=$(mktemp -d)
psql_db() { psql "$dburl" -X -q -v ON_ERROR_STOP=1 "$@"; }

if [ -n "$(psql "$server/postgres" -XAtc "SELECT 1 FROM pg_database WHERE datname = '$db'")" ]; then
  echo "database $db exists; give a new name" >&2
  exit 1
fi
go build -o "$tmp/pinload" ./cmd/pinload
pin=${PIN_HOT_PIN_BINARY:-$tmp/pin}
[ -n "${PIN_HOT_PIN_BINARY:-}" ] || go build -o "$pin" ./cmd/pin

secret=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
PIN_DATABASE_URL=$dburl PIN_HTTP_ADDR=$http PIN_DEV_KAFKA_ADDR=$kafka PIN_AUTH_JWT_SECRET=$secret \
  PIN_LOG_LEVEL=warn "$pin" dev >"$tmp/pin.log" 2>&1 &
pid=$!
cleanup() {
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  if [ "${PIN_HOT_KEEP:-}" != 1 ]; then
    psql "$server/postgres" -XAtqc "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
for _ in $(seq 120); do
  curl -fs "http://$http/readyz" >/dev/null && break
  kill -0 "$pid" 2>/dev/null || { cat "$tmp/pin.log" >&2; exit 1; }
  sleep 0.5
done

"$tmp/pinload" -url "http://$http" -secret "$secret" -clients 8 -warmup 0s \
  -duration "${PIN_HOT_DURATION:-2m}" -rate "${PIN_HOT_RATE:-80}" \
  -targets "${PIN_HOT_TARGETS:-300}" -cancel-after "${PIN_HOT_CANCEL_AFTER:-50}"

echo "waiting for the relay and the boost projection to apply every event"
outbox='outbox."pin_promotion_purchase_changed_v1"'
for _ in $(seq 600); do
  left=$(psql_db -Atc "SELECT (SELECT count(*) FROM $outbox WHERE NOT acked)
    + (SELECT count(*) FROM $outbox) - (SELECT count(*) FROM consumer.inbox WHERE consumer = 'boost')")
  [ "$left" = 0 ] && break
  sleep 1
done
[ "$left" = 0 ] || { echo "events still not applied: $left" >&2; exit 1; }
# Stopping the server ends its sessions, which flushes their statistics.
kill "$pid"; wait "$pid" || true
sleep 1

tables="'outbox.pin_promotion_purchase_changed_v1','boost.target_boosts','boost.purchase_targets',
  'consumer.inbox','consumer.aggregate_versions'"
report() {
  psql_db -c "SELECT pg_stat_force_next_flush()" >/dev/null
  psql_db -c "
    WITH e AS (SELECT count(*) AS events FROM $outbox)
    SELECT s.schemaname || '.' || s.relname AS \"table\",
      pg_total_relation_size(s.relid) AS bytes,
      round(pg_total_relation_size(s.relid)::numeric / e.events) AS bytes_per_event,
      pg_relation_size(s.relid) AS heap, pg_indexes_size(s.relid) AS indexes,
      s.n_live_tup AS live, s.n_dead_tup AS dead, s.n_tup_del AS deletes, s.n_tup_upd AS updates, s.n_tup_hot_upd AS hot,
      CASE WHEN s.n_tup_upd > 0 THEN round(s.n_tup_hot_upd::numeric / s.n_tup_upd, 2) END AS hot_ratio
    FROM pg_stat_user_tables s, e
    WHERE s.schemaname || '.' || s.relname IN ($tables)
    ORDER BY 1"
}
echo "events: $(psql_db -Atc "SELECT count(*) FROM $outbox"), autovacuum: $(psql_db -Atc 'SHOW autovacuum')"
echo "== after the load"
report
psql_db -c "VACUUM $outbox, boost.target_boosts, boost.purchase_targets, consumer.inbox, consumer.aggregate_versions"
echo "== after one VACUUM"
report
