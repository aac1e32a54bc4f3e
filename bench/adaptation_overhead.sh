#!/usr/bin/env bash
# The runtime phase's cost in libtuccl (backend/adaptive_runtime.h): AllReduce on 4 CPU-device
# ranks over loopback, 1,000 timed iterations (tuccl-bench, in-place and out-of-place: 2,000
# calls of one key), with each rank's per-call group read from its TUCCL_DEBUG=TRACE log.
#
# Per scenario: calls per rank, the calls of the warm-up (TUCCL_ADAPT_WARMUP, default 64: the
# static choice, nothing exchanged), the calls that ran a group other than the exploited one
# (exploration: the first round and the probes), their fraction, the switches ("TuCCL adapt:"
# lines), and whether every rank ran the same group at every call.
#   none        nothing slowed: the static choice stays
#   slow-0      TUCCL_TEST_DELAY_GROUP=0:2000 (group 0 2 ms slower): every rank moves to group 1
#   slow-1      TUCCL_TEST_DELAY_GROUP=1:2000: group 1 is only probed
#
# Usage: bench/adaptation_overhead.sh [--build DIR] [--iters N] [--bytes SIZE] [--ranks N]
set -euo pipefail

build=build
iters=1000
bytes=16K
ranks=4
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --bytes) bytes=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "adaptation_overhead.sh: unknown argument '$1' (--help)" >&2; exit 2 ;;
  esac
done
for tool in tuccl-run tuccl-bench; do
  if [ ! -x "$build/tools/$tool" ]; then
    echo "adaptation_overhead.sh: $build/tools/$tool is not built (cmake --build $build)" >&2
    exit 2
  fi
done
work=$(mktemp -d -t tuccl-adapt-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT

printf "%-8s %8s %8s %10s %9s %9s %11s\n" scenario calls warm-up exploring fraction switches "ranks agree"
for scenario in none slow-0 slow-1; do
  dir="$work/$scenario"
  mkdir -p "$dir"
  delay=()
  case "$scenario" in
    slow-0) delay=(TUCCL_TEST_DELAY_GROUP=0:2000) ;;
    slow-1) delay=(TUCCL_TEST_DELAY_GROUP=1:2000) ;;
  esac
  env TUCCL_ADAPT=1 TUCCL_DEVICE=cpu TUCCL_DEBUG=TRACE TUCCL_DEBUG_FILE="$dir/log.%p" TUCCL_ADAPT_FILE="$dir/learned.json" \
    "${delay[@]}" "$build/tools/tuccl-run" -n "$ranks" -- \
    "$build/tools/tuccl-bench" allreduce -b "$bytes" -e "$bytes" -n "$iters" -w 0 -c 0 > "$dir/bench.out" 2>&1 || {
    echo "adaptation_overhead.sh: the $scenario run failed:" >&2
    cat "$dir/bench.out" >&2
    exit 1
  }
  python3 - "$dir" "$scenario" <<'PY'
import glob, re, sys
dir_, scenario = sys.argv[1], sys.argv[2]
runs, explored, switches, warming = {}, {}, {}, {}
for path in glob.glob(dir_ + "/log.*"):
    for line in open(path):
        m = re.search(r"TuCCL adapt trace: rank=(\d+) call=(\d+) .* runs group=(\d+)( \(exploring\))?( \(warming up\))?", line)
        if m:
            r = int(m.group(1))
            runs.setdefault(r, []).append(int(m.group(3)))
            explored[r] = explored.get(r, 0) + (1 if m.group(4) else 0)
            warming[r] = warming.get(r, 0) + (1 if m.group(5) else 0)
        elif re.search(r"TuCCL adapt: rank=(\d+) call=", line):
            r = int(re.search(r"rank=(\d+)", line).group(1))
            switches[r] = switches.get(r, 0) + 1
calls = len(runs.get(0, []))
agree = all(seq == runs[0] for seq in runs.values()) and len(runs) > 1
fraction = explored.get(0, 0) / calls if calls else 0
print(f"{scenario:<8} {calls:>8} {warming.get(0, 0):>8} {explored.get(0, 0):>10} {100 * fraction:>8.1f}% {switches.get(0, 0):>9} {'yes' if agree else 'NO':>11}")
PY
done
