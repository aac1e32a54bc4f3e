#!/usr/bin/env bash
# tuccl-tune --profiler tuccl measures candidates with libtuccl runs and writes a table that
# libtuccl then serves: the table names its algorithms (tucclAlgorithm), and a tuccl-bench run
# with TUCCL_TUNER_TABLE logs (TUCCL_DEBUG=INFO) that its AllReduce plans come from the entries.
#
# usage: tune_with_libtuccl.sh TOOLS_DIR CACHE_DIR
set -euo pipefail
tools=$1
export TUCCL_CACHE_DIR=$2 TUCCL_DEVICE=cpu
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$tools/tuccl-tune" --profiler tuccl --topo preset:dgx-a100:gpus=2 --collectives allreduce --sizes 64K:256K \
  --budget 6 --max-resource 2 --seed 1 --timeout 120 -q -o "$tmp/table.json"
grep -qE '"tucclAlgorithm": "(ring|direct)"' "$tmp/table.json"
TUCCL_TUNER_TABLE=$tmp/table.json TUCCL_DEBUG=INFO "$tools/tuccl-run" -n 2 --timeout 200 -- \
  "$tools/tuccl-bench" allreduce -b 64K -e 256K -f 4 -n 2 -w 1 -c 1 > "$tmp/run.txt" 2>&1 || { cat "$tmp/run.txt"; exit 1; }
grep -qE "AllReduce: table entry 0 \(.*tucclAlgorithm (ring|direct)" "$tmp/run.txt" || { cat "$tmp/run.txt"; exit 1; }
grep -q "Out of bounds values : 0 OK" "$tmp/run.txt" || { cat "$tmp/run.txt"; exit 1; }
echo "tuned table served"
