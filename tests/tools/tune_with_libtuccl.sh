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
  --budget 6 --max-resource 2 --seed 1 --timeout 120 -q --no-confirm -o "$tmp/table.json"
grep -qE '"tucclAlgorithm": "(ring|direct)"' "$tmp/table.json"
TUCCL_TUNER_TABLE=$tmp/table.json TUCCL_DEBUG=INFO "$tools/tuccl-run" -n 2 --timeout 200 -- \
  "$tools/tuccl-bench" allreduce -b 64K -e 256K -f 4 -n 2 -w 1 -c 1 > "$tmp/run.txt" 2>&1 || { cat "$tmp/run.txt"; exit 1; }
grep -qE "AllReduce: table entry 0 \(.*tucclAlgorithm (ring|direct)" "$tmp/run.txt" || { cat "$tmp/run.txt"; exit 1; }
grep -q "Out of bounds values : 0 OK" "$tmp/run.txt" || { cat "$tmp/run.txt"; exit 1; }
echo "tuned table served"

# This machine without --topo: CPU-device ranks, every size confirmed against the defaults. The
# entry is the default unless its configuration won significantly; either way it carries the
# evidence (the ratio, its interval, the pairs), and no NCCL model is compared with CPU ranks.
"$tools/tuccl-tune" --profiler tuccl --ranks 2 --collectives allreduce --sizes 64K:64K --budget 4 \
  --max-resource 3 --confirm-rounds 3:4 --seed 1 --timeout 120 -o "$tmp/host.json" > "$tmp/host.txt" 2>&1 ||
  { cat "$tmp/host.txt"; exit 1; }
if grep -q xNCCL "$tmp/host.txt"; then cat "$tmp/host.txt"; echo "CPU ranks compared with the NCCL model"; exit 1; fi
python3 - "$tmp/host.json" <<'PY'
import json, sys
table = json.load(open(sys.argv[1]))
[entry] = table["entries"]
assert entry["nRanks"] == 2 and entry["nNodes"] == 1, entry
versus = entry["versusDefault"]
assert 3 <= versus["pairs"] <= 4 and 0 <= versus["won"] <= versus["pairs"], versus
assert versus["low"] <= versus["ratio"] <= versus["high"], versus
if entry.get("default"):
    assert "tucclAlgorithm" not in entry and versus["high"] >= 1, entry
else:
    assert entry["tucclAlgorithm"] in ("ring", "direct") and versus["high"] < 1, entry
assert entry["lowUs"] <= entry["timeUs"] <= entry["highUs"] and entry["samples"] >= 3, entry
# The alternatives fastest first; a tuned entry is the fastest of all (a default entry keeps the
# defaults even where a rival's median was lower but not significantly).
times = [g["timeUs"] for g in entry.get("groups", [])]
assert times == sorted(times), times
assert entry.get("default") or all(entry["timeUs"] <= t for t in times), entry
print("confirmed entry:", "default" if entry.get("default") else entry["tucclAlgorithm"], versus)
PY
TUCCL_TUNER_TABLE=$tmp/host.json TUCCL_DEBUG=INFO "$tools/tuccl-run" -n 2 --timeout 200 -- \
  "$tools/tuccl-bench" allreduce -b 64K -e 64K -n 2 -w 1 -c 1 > "$tmp/host-run.txt" 2>&1 ||
  { cat "$tmp/host-run.txt"; exit 1; }
grep -q "AllReduce: table entry 0" "$tmp/host-run.txt" || { cat "$tmp/host-run.txt"; exit 1; }
grep -q "Out of bounds values : 0 OK" "$tmp/host-run.txt" || { cat "$tmp/host-run.txt"; exit 1; }
echo "confirmed table served"
