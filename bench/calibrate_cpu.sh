#!/usr/bin/env bash
# Calibrate the simulator on this machine's CPU device and print how well it predicts the
# machine before and after: tuccl-topo probe measures the ranks, tuccl-bench times ring AllReduce
# and AllGather (each run keeping its plan in its own plan cache), and tuccl-calibrate fits the
# cost model to the sizes of --fit and checks it on the others (held out).
#
# Prints the calibration report: per collective and size the measured time, the simulator's
# prediction with the default constants and with the fitted ones, and the median and worst
# error on the held-out sizes. Writes to the output directory: topo.json (probed), cost.json
# (fitted), topo-calibrated.json (the probed topology naming cost.json: tuccl-sim --topo uses it),
# the bench outputs and report.txt.
#
# Usage: bench/calibrate_cpu.sh [--build DIR] [--ranks 4] [--ranks-per-node N] [--min 1M] [--max 256M]
#          [--fit 1M,4M,16M,64M,256M] [--iters 10] [--cycles 3] [--out DIR]
# --ranks-per-node N runs the ranks as hosts of N (tuccl-run), so the fit also covers the
# inter-host path (the proxies over loopback TCP): its hop latency and per-TB network rate.
set -euo pipefail

build=build
ranks=4
perNode=""
min=1M
max=256M
fit=1M,4M,16M,64M,256M
iters=10
cycles=3
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --ranks-per-node) perNode=$2; shift 2 ;;
    --min) min=$2; shift 2 ;;
    --max) max=$2; shift 2 ;;
    --fit) fit=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --cycles) cycles=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "calibrate_cpu.sh: unknown argument '$1' (--help)" >&2; exit 2 ;;
  esac
done
for tool in tuccl-run tuccl-topo tuccl-bench tuccl-calibrate; do
  if [ ! -x "$build/tools/$tool" ]; then
    echo "calibrate_cpu.sh: $build/tools/$tool is not built (cmake --build $build)" >&2
    exit 2
  fi
done
if [ -z "$out" ]; then out=$(mktemp -d -t tuccl-calibrate.XXXXXX); fi
mkdir -p "$out"
export TUCCL_DEVICE=cpu
hosts=()
if [ -n "$perNode" ]; then hosts=(--ranks-per-node "$perNode"); fi

"$build/tools/tuccl-run" -n "$ranks" "${hosts[@]}" --timeout 600 -- "$build/tools/tuccl-topo" probe -o "$out/topo.json" \
  --report "$out/probe.txt" --force
runs=()
for collective in allreduce allgather; do
  rm -rf "$out/plans-$collective"
  # The built-in ring, as the simulator will run it; its plan stays in its own cache.
  TUCCL_ALGO=ring TUCCL_CACHE_DIR="$out/plans-$collective" "$build/tools/tuccl-run" -n "$ranks" "${hosts[@]}" --timeout 1800 -- \
    "$build/tools/tuccl-bench" "$collective" -b "$min" -e "$max" -f 2 -n "$iters" -w 2 -c 0 -N "$cycles" \
    > "$out/$collective.txt"
  runs+=(--run "$collective,$out/$collective.txt,$out/plans-$collective")
done
"$build/tools/tuccl-calibrate" --topo "$out/topo.json" "${runs[@]}" --fit "$fit" --class "cpu ($ranks ranks${perNode:+, $perNode per host})" \
  -o "$out/cost.json" --topo-output "$out/topo-calibrated.json" --report "$out/report.txt" --force
cat "$out/report.txt"
echo "# kept in $out: topo.json, cost.json, topo-calibrated.json (tuccl-sim --topo uses its cost.json), report.txt"
