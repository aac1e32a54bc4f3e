#!/bin/sh
# tuccl-calibrate end to end on the CPU device (bench/calibrate_cpu.sh at small sizes): the report
# has a row per measured size of both runs, fitted and held out, and the summary; the fitted file
# names its class and a source for every fitted number; the calibrated topology names it and
# tuccl-sim --topo simulates under it. Bad inputs are exit 2 with the reason: a plan cache without
# the run's collective, no size held out, an existing output without --force, a run without its
# plans, an unknown collective, a bad size, a plan of another rank count. No timing is
# asserted: the errors depend on this machine's load.
# Usage: calibrate_cpu.sh BUILD_DIR SOURCE_DIR WORK_DIR
set -u
build=$1 source=$2 work=$3
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work" || fail "cannot make $work"
"$source/bench/calibrate_cpu.sh" --build "$build" --min 1M --max 8M --fit 1M,4M --iters 2 --cycles 1 \
  --out "$work" > "$work/out.txt" 2>&1 || { cat "$work/out.txt"; fail "calibrate_cpu.sh failed"; }
cat "$work/out.txt"
[ "$(grep -cE '^  allreduce.txt +AllReduce ' "$work/out.txt")" -eq 4 ] || fail "not 4 AllReduce rows"
[ "$(grep -cE '^  allgather.txt +AllGather ' "$work/out.txt")" -eq 4 ] || fail "not 4 AllGather rows"
[ "$(grep -cE ' fit$' "$work/out.txt")" -eq 4 ] || fail "not 4 fitted points"
[ "$(grep -cE ' held out$' "$work/out.txt")" -eq 4 ] || fail "not 4 held-out points"
grep -q '^# held out (4 points): median error ' "$work/out.txt" || fail "no held-out summary"
python3 - "$work/cost.json" <<'PY' || fail "the cost file lacks its class or sources"
import json, sys
cost = json.load(open(sys.argv[1]))
assert cost["hardwareClass"] == "cpu (4 ranks)", cost["hardwareClass"]
for key in ("perThreadGBps", "syncOverheadUs", "cacheBytes", "protocols.Simple.baseLatencyUs"):
    assert cost["sources"][key].startswith("fitted by tuccl-calibrate"), key
assert cost["sources"]["networkTbGBps"].startswith("ResCCL"), "the unfitted numbers keep their sources"
PY
grep -q '"costModel": "cost.json"' "$work/topo-calibrated.json" || fail "the calibrated topology does not name cost.json"
"$build/tools/tuccl-sim" "$source/examples/algorithms/ring_allreduce.resccl" --topo "$work/topo-calibrated.json" \
  --sizes 1M:2M > "$work/sim.txt" || fail "tuccl-sim cannot simulate on the calibrated topology"
grep -q 'cost model cpu (4 ranks)$' "$work/sim.txt" || { cat "$work/sim.txt"; fail "tuccl-sim did not use cost.json"; }

cal="$build/tools/tuccl-calibrate"
out=$("$cal" --topo "$work/topo.json" --run "allgather,$work/allreduce.txt,$work/plans-allreduce" --fit 1M \
  -o "$work/x.json" 2>&1)
status=$?
[ "$status" -eq 2 ] || { echo "$out"; fail "the wrong collective: exit $status, not 2"; }
echo "$out" | grep -q "0 AllGather plans" || { echo "$out"; fail "the missing plan is not explained"; }
out=$("$cal" --topo "$work/topo.json" --run "allreduce,$work/allreduce.txt,$work/plans-allreduce" \
  --fit 1M,2M,4M,8M -o "$work/x.json" 2>&1)
status=$?
[ "$status" -eq 2 ] || { echo "$out"; fail "nothing held out: exit $status, not 2"; }
echo "$out" | grep -q "none is held out" || { echo "$out"; fail "nothing held out is not explained"; }
out=$("$cal" --topo "$work/topo.json" --run "allreduce,$work/allreduce.txt,$work/plans-allreduce" --fit 1M \
  -o "$work/cost.json" 2>&1)
status=$?
[ "$status" -eq 2 ] || { echo "$out"; fail "an existing output: exit $status, not 2"; }
echo "$out" | grep -q "pass --force" || { echo "$out"; fail "the existing output is not named"; }
# Malformed runs and sizes: exit 2 naming what is wrong.
expect_refused() {  # WHAT EXPECTED-TEXT ARGS...
  what=$1 text=$2; shift 2
  out=$("$cal" --topo "$work/topo.json" "$@" -o "$work/refused.json" 2>&1)
  status=$?
  [ "$status" -eq 2 ] || { echo "$out"; fail "$what: exit $status, not 2"; }
  echo "$out" | grep -q -- "$text" || { echo "$out"; fail "$what: '$text' not said"; }
  [ ! -e "$work/refused.json" ] || fail "$what: a cost file was written"
}
expect_refused "a run without its plans" "expected COLLECTIVE,OUTPUT,PLANS" --run "allreduce,$work/allreduce.txt" --fit 1M
expect_refused "an unknown collective" "unknown collective 'allsum'" \
  --run "allsum,$work/allreduce.txt,$work/plans-allreduce" --fit 1M
expect_refused "a bad fit size" "--fit 1Q" --run "allreduce,$work/allreduce.txt,$work/plans-allreduce" --fit 1Q
"$build/tools/tuccl-topo" export preset:dgx-a100 --format json -o "$work/eight.json" > /dev/null 2>&1 ||
  fail "cannot export an 8-rank topology"
out=$("$cal" --topo "$work/eight.json" --run "allreduce,$work/allreduce.txt,$work/plans-allreduce" --fit 1M \
  -o "$work/refused.json" 2>&1)
status=$?
[ "$status" -eq 2 ] || { echo "$out"; fail "a plan of another rank count: exit $status, not 2"; }
echo "$out" | grep -q "a plan of 4 ranks on a topology of 8" || { echo "$out"; fail "the rank counts are not named"; }
echo PASS
