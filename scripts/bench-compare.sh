#!/usr/bin/env bash
# scripts/bench-compare.sh OLD NEW [ROUNDS]: the benchmarks that guard the
# producer side (expiry batch at 10k and 1M, the relay's drain and
# commit->consumer latency, the API against pgbench), run from two commits on
# the same machine, interleaved: round 1 runs OLD then NEW for each
# benchmark, round 2 NEW then OLD, and so on. Both sides are compiled before
# the first measurement, so no build runs beside a benchmark. Raw output in
# .bench/compare-<UTC time>/, a table of every figure per round at the end.
#
# Environment: PIN_TEST_DATABASE_URL, PIN_BENCH_REFERENCE_DIR (as make bench),
#   PIN_BENCH_EXPIRE_SIZES (default 10k,1M), PIN_BENCH_BATCH_ITERATIONS (30),
#   PIN_BENCH_API_ROUNDS (4), PIN_BENCH_SUSTAINED_STEPS (2000),
#   PIN_BENCH_COMPARE: which of expire-batch, relay and api to run (default
#   all three, comma-separated). An even ROUNDS gives each side the first
#   and the second place equally often: the second runs after the first's
#   load, and on this machine that alone costs it a few percent.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 OLD-COMMIT NEW-COMMIT [ROUNDS]" >&2; exit 2; }
cd "$(dirname "$0")/.."
root=$PWD
old=$(git rev-parse --short "$1") new=$(git rev-parse --short "$2") rounds=${3:-2}
out=$root/.bench/compare-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out/tmp"
export TMPDIR=$out/tmp
export PIN_TEST_DATABASE_URL=${PIN_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
export PIN_BENCH_REFERENCE_DIR=${PIN_BENCH_REFERENCE_DIR:-$(cd "$root/.." && pwd)/shared/bench/expiry-bound}
export PIN_BENCH_EXPIRE_SIZES=${PIN_BENCH_EXPIRE_SIZES:-10k,1M}
export PIN_BENCH_SUSTAINED_STEPS=${PIN_BENCH_SUSTAINED_STEPS:-2000}
cleanup() {
  kill "${sampler:-}" 2>/dev/null || true
  for side in old new; do git worktree remove --force "$out/src-$side" 2>/dev/null || true; done
  rm -rf "$out/tmp"
}
trap cleanup EXIT
(while :; do echo "$(date +%s) $(cut -d' ' -f1 /proc/loadavg)"; sleep 5; done) >"$out/load.txt" &
sampler=$!

# name package benchmark benchtime
all_benches=(
  "expire-batch ./modules/promotion/internal/expiry/expirebench BenchmarkExpireBatch\$ ${PIN_BENCH_BATCH_ITERATIONS:-30}x"
  "relay ./platform/outbox BenchmarkCommitToKafka\$ 1x"
  "api ./cmd/pinload BenchmarkAPI\$ 1x"
)
benches=()
for b in "${all_benches[@]}"; do
  case ",${PIN_BENCH_COMPARE:-expire-batch,relay,api}," in *",${b%% *},"*) benches+=("$b") ;; esac
done
[ ${#benches[@]} -gt 0 ] || { echo "PIN_BENCH_COMPARE names none of expire-batch, relay, api" >&2; exit 2; }
# side_pkg SIDE PKG BENCH: PKG as it is in SIDE's tree; where a package moved
# between the two commits (the expiry's benchmarks went to
# internal/expiry/expirebench), the folder whose tests define BENCH.
side_pkg() {
  local side=$1 pkg=$2 fn=${3%\$}
  if [ -d "$out/src-$side/$pkg" ]; then echo "$pkg"; return; fi
  local file
  file=$(cd "$out/src-$side" && grep -rl --include='*_test.go' "^func $fn(" . | head -n 1)
  [ -n "$file" ] || { echo "no package defines $fn in $side" >&2; exit 1; }
  dirname "$file"
}
for side in old new; do
  commit=$old; [ $side = new ] && commit=$new
  git worktree add --detach "$out/src-$side" "$commit" >/dev/null
  echo "build $side ($commit)"
  (cd "$out/src-$side" && go build -o "$out/$side-pin" ./cmd/pin)
  for b in "${benches[@]}"; do
    read -r name pkg bench _ <<<"$b"
    pkg=$(side_pkg "$side" "$pkg" "$bench")
    (cd "$out/src-$side" && go test -c -o "$out/$side-$name.test" "$pkg")
  done
done

run() { # run SIDE ROUND NAME PKG BENCH BENCHTIME
  local side=$1 round=$2 name=$3 pkg=$4 bench=$5 benchtime=$6 from
  from=$(date +%s)
  echo "== round $round $name $side (load $(cut -d' ' -f1 /proc/loadavg))"
  pkg=$(side_pkg "$side" "$pkg" "$bench")
  (cd "$out/src-$side/$pkg" && PIN_BENCH_PIN_BINARY=$out/$side-pin "$out/$side-$name.test" \
    -test.run '^$' -test.bench "$bench" -test.benchtime "$benchtime" -test.timeout 30m) \
    >"$out/$round-$name-$side.txt" 2>&1 || echo "   FAILED: $out/$round-$name-$side.txt"
  awk -v f="$from" -v t="$(date +%s)" '$1 >= f && $1 <= t {s += $2; c++} END {if (c) printf "   load %.2f\n", s/c}' "$out/load.txt"
}
for round in $(seq 1 "$rounds"); do
  first=old second=new
  [ $((round % 2)) = 0 ] && first=new second=old
  for b in "${benches[@]}"; do
    read -r name pkg bench benchtime <<<"$b"
    run $first "$round" "$name" "$pkg" "$bench" "$benchtime"
    run $second "$round" "$name" "$pkg" "$bench" "$benchtime"
  done
done

metric() { # metric FILE BENCHMARK UNIT
  awk -v b="$2" -v u="$3" '$1 ~ "^"b"(-[0-9]+)?$" {for (i = 3; i < NF; i += 2) if ($(i+1) == u) {print $i; exit}}' "$1"
}
rows=()
IFS=, read -r -a sizes <<<"$PIN_BENCH_EXPIRE_SIZES"
for size in "${sizes[@]}"; do
  rows+=("expire-batch BenchmarkExpireBatch/purchases=$size/batch=200 batch-ms" "expire-batch BenchmarkExpireBatch/purchases=$size/batch=200 batch/bound")
done
rows+=("relay BenchmarkCommitToKafka/drain events/s" "relay BenchmarkCommitToKafka/drain-analyzed events/s" "relay BenchmarkCommitToKafka/latency-200eps p99-ms"
  "api BenchmarkAPI api/pgbench" "api BenchmarkAPI api-p99/pgbench-p99" "api BenchmarkAPI api-purchases/s" "api BenchmarkAPI api-errors")
{
  echo "old = $old, new = $new, $rounds rounds (odd rounds old first)"
  printf '| %s | %s |' figure round
  echo " old | new | new ÷ old |"
  echo "| --- | --- | --- | --- | --- |"
  for r in "${rows[@]}"; do
    read -r name bench unit <<<"$r"
    [ -e "$out/1-$name-old.txt" ] || continue
    ratios=()
    for round in $(seq 1 "$rounds"); do
      o=$(metric "$out/$round-$name-old.txt" "$bench" "$unit") n=$(metric "$out/$round-$name-new.txt" "$bench" "$unit")
      q=$(awk -v o="${o:-0}" -v n="${n:-0}" 'BEGIN {if (o > 0) printf "%.2f", n / o; else print "-"}')
      [ "$q" = - ] || ratios+=("$(awk -v o="$o" -v n="$n" 'BEGIN {print n / o}')")
      echo "| ${bench#Benchmark} $unit | $round | ${o:-?} | ${n:-?} | $q |"
    done
    [ ${#ratios[@]} -lt 2 ] || echo "| ${bench#Benchmark} $unit | geometric mean | | | $(printf '%s\n' "${ratios[@]}" | awk '{s += log($1); c++} END {printf "%.2f", exp(s / c)}') |"
  done
} | tee "$out/summary.md"
