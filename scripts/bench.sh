#!/usr/bin/env bash
# `make bench`: every benchmark of docs/performance.md, on real PostgreSQL
# (PIN_TEST_DATABASE_URL, a fresh database per benchmark via platform/testbed)
# and the in-process kfake broker. Prints every figure and a targets table;
# raw output goes to .bench/<UTC time>/ (git-ignored), .bench/latest points
# at it. Nothing is written outside .bench/ in the repository (go's build
# cache aside).
#
# Environment:
#   PIN_BENCH_PROFILE=1          also write CPU and allocation profiles (adds ~1 min)
#   PIN_BENCH_EXPIRE_SIZES       table sizes of the expiry batch (default 10k,100k,1M)
#   PIN_BENCH_BATCH_ITERATIONS   iterations per size (default 30)
#   PIN_BENCH_DRAIN_ITERATIONS   drains per instance count (default 5)
#   PIN_BENCH_OLD_COMMIT         the commit BenchmarkExpireService compares with (default 9a26082)
#   PIN_BENCH_SERVICE_ITERATIONS interleaved service-level drains and --once per side (default 3)
#   PIN_BENCH_REFERENCE_DIR      the shared reference bound of the expiry batch
#                                (default ../shared/bench/expiry-bound beside the repository)
#   PIN_BENCH_REFERENCE_ITERATIONS  interleaved drains, module and reference, per size (default 5)
#   PIN_BENCH_API_DURATION       measured time of each API and pgbench round (default 10s)
#   PIN_BENCH_API_ROUNDS         interleaved API/pgbench rounds (default 4)
#   PIN_BENCH_SUSTAINED_STEPS    offered loads of the outbox relay (default 2000,4000,6000,8000,10000)
#   PIN_BENCH_INSERT_ITERATIONS  expiry-batch outbox inserts per row layout (default 30)
#   PIN_BENCH_SNAPSHOT_PURCHASES Active purchases of the snapshot under load (default 10000)
#   PIN_BENCH_SNAPSHOT_RATE      the snapshot's --rate (default 500)
#   PIN_BENCH_SNAPSHOT_BATCH_SIZE the snapshot's --batch-size (default: the command's)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

stamp=$(date -u +%Y%m%dT%H%M%SZ)
out=.bench/$stamp
mkdir -p "$out/tmp" "$out/bin"
ln -sfn "$stamp" .bench/latest
# Test binaries' temporary files (the pin binary they build, pgbench logs)
# stay under .bench/ too.
export TMPDIR=$root/$out/tmp
export PIN_TEST_DATABASE_URL=${PIN_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

# --- pgbench -------------------------------------------------------------
# `command -v` is not enough: Debian's /usr/bin/pgbench is a wrapper
# (postgresql-client-common) that fails when no pgbench binary is installed.
have_pgbench() { pgbench --version >/dev/null 2>&1; }
if ! have_pgbench && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  say "pgbench is missing: installing it with apt-get"
  apt-get update -qq
  # Depending on the release pgbench is in the client package or (Debian 12)
  # in the server package, which postgresql-contrib pulls in.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-client >/dev/null || true
  have_pgbench || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-contrib >/dev/null || true
fi
if ! have_pgbench; then
  cat >&2 <<'MSG'
pgbench is not installed; the API benchmark compares against it.
  Debian/Ubuntu:  sudo apt-get install postgresql-client
                  (if pgbench still fails, e.g. Debian 12: sudo apt-get install postgresql-contrib)
  macOS:          brew install libpq && brew link --force libpq
MSG
  exit 1
fi

# --- the machine ---------------------------------------------------------
pg_version=unknown
if command -v psql >/dev/null 2>&1; then
  pg_version=$(psql "$PIN_TEST_DATABASE_URL" -Atc 'SHOW server_version' 2>/dev/null || echo unknown)
fi
{
  echo "date:        $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host:        $(uname -srm)"
  echo "cpu:         $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo 2>/dev/null || echo unknown)"
  echo "nproc:       $(nproc)"
  echo "memory:      $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo 2>/dev/null || echo unknown)"
  echo "postgresql:  $pg_version ($(pgbench --version))"
  echo "go:          $(go version)"
  echo "git:         $(git describe --always --dirty 2>/dev/null || echo unknown)"
  echo "load avg:    $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min) at start"
} | tee "$out/machine.txt"

# Load average every 5 s for the whole run, so each figure can be read
# against the load it was measured under.
(while :; do echo "$(date +%s) $(cut -d' ' -f1 /proc/loadavg)"; sleep 5; done) >"$out/load.txt" &
sampler=$!
trap 'kill $sampler 2>/dev/null || true; rm -rf "$root/$out/tmp"' EXIT

# step NAME GO-TEST-ARGS...: runs one benchmark, tees its output to
# $out/NAME.txt and notes the load average over its run. A failing
# benchmark is reported and the others still run; the script then exits 1.
failed=()
step() {
  local name=$1; shift
  local from; from=$(date +%s)
  say "$name  (load $(cut -d' ' -f1 /proc/loadavg))"
  local rc=0
  go test -run '^$' -timeout 30m "$@" 2>&1 | tee "$out/$name.txt" || rc=${PIPESTATUS[0]}
  local to; to=$(date +%s)
  awk -v f="$from" -v t="$to" -v n="$name" '$1 >= f && $1 <= t {s += $2; c++; if ($2 > m) m = $2}
    END {if (c) printf "%s %.2f %.2f\n", n, s/c, m; else printf "%s - -\n", n}' "$out/load.txt" >>"$out/step-load.txt"
  if [ "$rc" != 0 ]; then
    echo "benchmark $name FAILED (exit $rc); see $out/$name.txt" >&2
    failed+=("$name")
  fi
}

profile() { # profile NAME: the go test flags that write NAME's profiles when asked to
  if [ "${PIN_BENCH_PROFILE:-}" = 1 ]; then
    echo "-cpuprofile $root/$out/$1.cpu.prof -memprofile $root/$out/$1.mem.prof -o $root/$out/bin/$1.test"
  fi
}

say "build pin"
go build -o "$out/bin/pin" ./cmd/pin
# The service-level expiry is measured against the main of 2026-11-30, the
# last before the producer-side rework (docs/performance.md).
old_commit=${PIN_BENCH_OLD_COMMIT:-9a26082}
say "build pin at $old_commit"
git worktree add --detach "$out/src-old" "$old_commit" >/dev/null
trap 'kill $sampler 2>/dev/null || true; git worktree remove --force "$root/$out/src-old" 2>/dev/null || true; rm -rf "$root/$out/tmp"' EXIT
(cd "$out/src-old" && go build -o "$root/$out/bin/pin-old" ./cmd/pin)

# shellcheck disable=SC2046 # profile's flags are meant to split
PIN_BENCH_EXPLAIN_DIR=$root/$out step expire-batch -bench 'BenchmarkExpireBatch$' \
  -benchtime "${PIN_BENCH_BATCH_ITERATIONS:-30}x" -v $(profile expire-batch) ./modules/promotion/internal/expiry/expirebench/
step expire-reference -bench 'BenchmarkExpireReference$' \
  -benchtime "${PIN_BENCH_REFERENCE_ITERATIONS:-5}x" -v ./modules/promotion/internal/expiry/expirebench/
PIN_BENCH_PIN_BINARY=$root/$out/bin/pin step expire-reference-once -bench 'BenchmarkExpireReferenceOnce$' \
  -benchtime "${PIN_BENCH_REFERENCE_ITERATIONS:-5}x" ./modules/promotion/internal/expiry/expirebench/
PIN_BENCH_PIN_BINARY=$root/$out/bin/pin PIN_BENCH_OLD_PIN_BINARY=$root/$out/bin/pin-old \
  step expire-service -bench 'BenchmarkExpireService$' -benchtime "${PIN_BENCH_SERVICE_ITERATIONS:-3}x" \
  ./modules/promotion/internal/expiry/expirebench/
# shellcheck disable=SC2046
step expire-drain -bench 'BenchmarkExpireDrain$' -benchtime "${PIN_BENCH_DRAIN_ITERATIONS:-5}x" \
  $(profile expire-drain) ./modules/promotion/internal/expiry/expirebench/
step expire-batch-bound -bench 'BenchmarkExpireBatchBound$' -benchtime 10x -v ./modules/promotion/internal/expiry/expirebench/
# shellcheck disable=SC2046
step relay -bench 'BenchmarkCommitToKafka$' -benchtime 1x -v \
  $(profile relay) ./platform/outbox/
step outbox-insert -bench 'BenchmarkOutboxInsert$' -benchtime "${PIN_BENCH_INSERT_ITERATIONS:-30}x" ./platform/outbox/
PIN_BENCH_PIN_BINARY=$root/$out/bin/pin step api -bench 'BenchmarkAPI$' -benchtime 1x -v ./cmd/pinload/
step boost-consumer -bench 'BenchmarkBoostConsumer$' -benchtime 1x -v ./modules/boost/
PIN_BENCH_PIN_BINARY=$root/$out/bin/pin step boost-e2e -bench 'BenchmarkBoostEndToEnd$' -benchtime 1x -v ./cmd/pinload/
PIN_BENCH_PIN_BINARY=$root/$out/bin/pin step snapshot-under-load -bench 'BenchmarkSnapshotUnderLoad$' -benchtime 1x -v ./cmd/pinload/
if [ "${PIN_BENCH_PROFILE:-}" = 1 ]; then
  # shellcheck disable=SC2046
  step api-inprocess -bench 'BenchmarkAPIInProcess$' -benchtime 1x $(profile api-inprocess) ./cmd/pinload/
fi

# --- summary -------------------------------------------------------------
# metric FILE BENCHMARK UNIT: the value of UNIT on BENCHMARK's result line.
metric() {
  awk -v b="$2" -v u="$3" '$1 ~ "^"b"(-[0-9]+)?$" {for (i = 3; i < NF; i += 2) if ($(i+1) == u) {print $i; exit}}' "$out/$1.txt"
}
# row LABEL VALUE OP TARGET UNIT [LOAD-STEP]
row() {
  local label=$1 value=$2 op=$3 target=$4 unit=$5 stepname=${6:-}
  local verdict=missing
  if [ -n "$value" ]; then
    verdict=$(awk -v v="$value" -v t="$target" -v op="$op" 'BEGIN {
      ok = (op == "<=" && v <= t) || (op == "<" && v < t) || (op == ">=" && v >= t) || (op == "==" && v == t)
      print ok ? "met" : "MISSED" }')
  fi
  local load=""
  [ -n "$stepname" ] && load=$(awk -v n="$stepname" '$1 == n {print "load " $2 " (max " $3 ")"}' "$out/step-load.txt")
  printf '%-46s %12s %-3s %-10s %-7s %s\n' "$label" "${value:-?}" "$op" "$target $unit" "$verdict" "$load" | tee -a "$out/summary.txt"
}

say "summary (raw output in $out/)"
: >"$out/summary.txt"
IFS=, read -r -a sizes <<<"${PIN_BENCH_EXPIRE_SIZES:-10k,100k,1M}"
for size in "${sizes[@]}"; do
  b="BenchmarkExpireBatch/purchases=$size/batch=200"
  printf '%-46s batch %s ms, cycle %s ms, bound %s ms\n' "expiry batch of 200, $size purchases" \
    "$(metric expire-batch "$b" batch-ms)" "$(metric expire-batch "$b" cycle-ms)" "$(metric expire-batch "$b" bound-ms)" | tee -a "$out/summary.txt"
  row "  module batch / bound" "$(metric expire-batch "$b" batch/bound)" "<=" 1.25 "x" expire-batch
  row "  whole cycle / bound (informative)" "$(metric expire-batch "$b" cycle/bound)" "<=" 1.25 "x" expire-batch
  b="BenchmarkExpireReference/purchases=$size/batch=200"
  printf '%-46s module %s ms, reference %s ms per batch\n' "drain of 10k due, $size purchases" \
    "$(metric expire-reference "$b" module-ms/batch)" "$(metric expire-reference "$b" reference-ms/batch)" | tee -a "$out/summary.txt"
  row "  module drain / shared reference, per batch" "$(metric expire-reference "$b" module/reference)" "<=" 1.5 "x" expire-reference
done
b=BenchmarkExpireReferenceOnce
printf '%-46s pin %s ms, psql %s ms\n' "last batch of 200 in a fresh process, 10k" \
  "$(metric expire-reference-once $b once-ms)" "$(metric expire-reference-once $b reference-once-ms)" | tee -a "$out/summary.txt"
row "  pin expire-promotions --once / psql form1" "$(metric expire-reference-once $b once/reference)" "<=" 2 "x" expire-reference-once
b=BenchmarkExpireService
printf '%-46s %s ms per batch, %s: %s ms\n' "drain with a relay running, 10k of 20k" \
  "$(metric expire-service $b drain-ms/batch)" "$old_commit" "$(metric expire-service $b old-drain-ms/batch)" | tee -a "$out/summary.txt"
row "  drain per batch / $old_commit's" "$(metric expire-service $b drain/old)" "<=" 1 "x" expire-service
printf '%-46s %s ms, %s: %s ms\n' "fresh pin expire-promotions --once, durationMs" \
  "$(metric expire-service $b once-ms)" "$old_commit" "$(metric expire-service $b old-once-ms)" | tee -a "$out/summary.txt"
row "  --once / $old_commit's" "$(metric expire-service $b once/old)" "<=" 1 "x" expire-service
printf '%-46s %s ms per batch, %s: %s ms\n' "  same drain, targets without statistics" \
  "$(metric expire-service $b nostats-drain-ms/batch)" "$old_commit" "$(metric expire-service $b old-nostats-drain-ms/batch)" | tee -a "$out/summary.txt"
row "  without statistics / analyzed (today's)" "$(metric expire-service $b nostats-drain/analyzed)" "<=" 1.2 "x" expire-service
row "  without statistics / $old_commit's" "$(metric expire-service $b nostats-drain/old)" "<=" 1 "x" expire-service
b=BenchmarkExpireDrain/backlog=10k
row "drain 10k, 1 instance" "$(metric expire-drain $b 1-instance-purchases/s)" ">=" 15000 "purchases/s" expire-drain
row "drain 10k, 2 instances" "$(metric expire-drain $b 2-instances-purchases/s)" ">=" 0 "purchases/s" expire-drain
row "drain 10k, 2 vs 1" "$(metric expire-drain $b 2-vs-1)" ">=" 1.5 "x" expire-drain
row "  shared reference, 2 workers vs 1 (this machine's own)" "$(metric expire-drain $b reference-2-vs-1)" ">=" 0 "x" expire-drain
row "  module's 2 vs 1 / reference's 2 vs 1" "$(metric expire-drain $b 2-vs-1/reference)" ">=" 0 "x" expire-drain
echo "  (each drain checked: 10k Expired, none due, exactly one Expired event per purchase)" | tee -a "$out/summary.txt"
b=BenchmarkExpireBatchBound/batch=10000
row "largest batch, slowest selection (bound 6 s)" "$(metric expire-batch-bound $b max-select-ms)" "<=" 3000 "ms" expire-batch-bound
row "largest batch, slowest write statement (6 s)" "$(metric expire-batch-bound $b max-write-ms)" "<=" 3000 "ms" expire-batch-bound
row "largest batch, slowest build (idle bound 5 s)" "$(metric expire-batch-bound $b max-build-ms)" "<=" 2500 "ms" expire-batch-bound
b=BenchmarkCommitToKafka/latency-200eps
row "relay commit->consumer p50 @200 ev/s" "$(metric relay $b p50-ms)" "<=" 25 "ms" relay
row "relay commit->consumer p99 @200 ev/s" "$(metric relay $b p99-ms)" "<=" 60 "ms" relay
row "relay drain of a 20k backlog" "$(metric relay BenchmarkCommitToKafka/drain events/s)" ">=" 7700 "events/s" relay
row "relay max sustained (backlog flat)" "$(metric relay BenchmarkCommitToKafka/sustained max-sustained-events/s)" ">=" 2000 "events/s" relay
b=BenchmarkOutboxInsert
row "outbox insert of a 200-event batch (json)" "$(metric outbox-insert $b insert-ms/migrated)" ">=" 0 "ms" outbox-insert
row "  same, payload and metadata jsonb / json" "$(metric outbox-insert $b insert-x/payload-jsonb)" ">=" 0 "x" outbox-insert
row "relay read of 200 rows (json)" "$(metric outbox-insert $b read-ms/migrated)" ">=" 0 "ms" outbox-insert
row "API purchases/s (32 clients, median of rounds)" "$(metric api BenchmarkAPI api-purchases/s)" ">=" 0 "/s" api
row "pgbench same transaction (32 clients)" "$(metric api BenchmarkAPI pgbench-tps)" ">=" 0 "tps" api
row "API / pgbench, median of interleaved rounds" "$(metric api BenchmarkAPI api/pgbench)" ">=" 0.7 "x" api
row "  pgbench, the same writes as one statement" "$(metric api BenchmarkAPI pgbench-one-statement-tps)" ">=" 0 "tps" api
row "  API / that (informative)" "$(metric api BenchmarkAPI api/pgbench-one-statement)" ">=" 0 "x" api
row "  worst round" "$(metric api BenchmarkAPI api/pgbench-worst)" ">=" 0.7 "x" api
row "API p50" "$(metric api BenchmarkAPI api-p50-ms)" ">=" 0 "ms" api
row "API p99 (first target: < 50 ms)" "$(metric api BenchmarkAPI api-p99-ms)" "<" 50 "ms" api
row "pgbench p99 (same clients)" "$(metric api BenchmarkAPI pgbench-p99-ms)" ">=" 0 "ms" api
row "API p99 / pgbench p99, median of rounds" "$(metric api BenchmarkAPI api-p99/pgbench-p99)" "<=" 1.2 "x" api
row "  worst round" "$(metric api BenchmarkAPI api-p99/pgbench-p99-worst)" "<=" 1.2 "x" api
row "API errors" "$(metric api BenchmarkAPI api-errors)" "==" 0 "" api
row "pin serve peak RSS idle (VmHWM)" "$(metric api BenchmarkAPI idle-MB)" "<" 60 "MB" api
row "pin serve peak RSS under load (VmHWM)" "$(metric api BenchmarkAPI load-MB)" "<" 150 "MB" api
row "boost consumer: events applied/s" "$(metric boost-consumer BenchmarkBoostConsumer events/s)" ">=" 2000 "events/s" boost-consumer
row "  same-run bound: 1 commit/event, 3 workers" "$(metric boost-consumer BenchmarkBoostConsumer bound-tx/s)" ">=" 0 "tx/s" boost-consumer
row "  consumer / bound" "$(metric boost-consumer BenchmarkBoostConsumer events/bound)" ">=" 0 "x" boost-consumer
row "API commit->boost projection p50 @200/s" "$(metric boost-e2e BenchmarkBoostEndToEnd p50-ms)" ">=" 0 "ms" boost-e2e
row "API commit->boost projection p99 @200/s" "$(metric boost-e2e BenchmarkBoostEndToEnd p99-ms)" "<" 60000 "ms" boost-e2e
b=BenchmarkSnapshotUnderLoad
row "API p99 @50/s without a snapshot" "$(metric snapshot-under-load $b api-p99-ms)" ">=" 0 "ms" snapshot-under-load
row "API p99 @50/s during snapshot --rate 500" "$(metric snapshot-under-load $b snapshot-api-p99-ms)" ">=" 0 "ms" snapshot-under-load
row "  with / without" "$(metric snapshot-under-load $b api-p99-ratio)" "<=" 1.5 "x" snapshot-under-load
row "  snapshot events/s (--rate 500)" "$(metric snapshot-under-load $b snapshot-events-per-s)" ">=" 450 "events/s" snapshot-under-load
row "  expiry: longest gap between cycles (interval 60 s)" "$(metric snapshot-under-load $b expire-gap-s)" "<=" 66 "s" snapshot-under-load
echo
echo "load average during each step (mean, max): $(tr '\n' ';' <"$out/step-load.txt")"
echo "raw output: $out/ (benchstat-compatible: benchstat $out/expire-batch.txt)"
if [ ${#failed[@]} -gt 0 ]; then
  echo "FAILED benchmarks: ${failed[*]}" >&2
  exit 1
fi
