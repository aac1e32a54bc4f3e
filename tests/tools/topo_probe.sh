#!/bin/sh
# tuccl-topo probe end to end on the CPU device: 4 ranks as 2 hosts of 2 (tuccl-run --ranks-per-node)
# write a topology that tuccl-topo show and tuccl-sim --topo read (2 nodes, 4 GPUs, a NIC per
# node), a report with all 6 pairs, intra and inter, and the concurrent pairs; with
# TUCCL_TEST_SLOW_PAIR=1,2 the report flags the pair 1-2 as slow; a bad value of the hook is exit 2
# naming it; ranks not numbered host by host are exit 2 with the reason; an existing output is
# refused without --force.
# With FAKE_DRIVER and FAKE_NVRTC (CUDA builds), the probe also runs on the CUDA device of the
# fake driver (device buffers, a stream per rank) and writes a topology tuccl-topo show reads.
# Usage: topo_probe.sh TUCCL_RUN TUCCL_TOPO TUCCL_SIM ALGORITHM WORK_DIR [FAKE_DRIVER FAKE_NVRTC]
set -u
run=$1 topo=$2 sim=$3 algorithm=$4 work=$5 driver=${6:-} nvrtc=${7:-}
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work" || fail "cannot make $work"
export TUCCL_DEVICE=cpu TUCCL_TIMEOUT_S=60
"$run" -n 4 --ranks-per-node 2 --timeout 240 -- "$topo" probe -o "$work/probed.json" --report "$work/report.txt" \
  --latency-iters 50 --bytes 1M || fail "the probe failed"
cat "$work/report.txt"
[ "$(grep -cE '^[0-3]-[0-3] +(intra|inter) ' "$work/report.txt")" -eq 6 ] || fail "not 6 pairs in the report"
[ "$(grep -cE '^[0-3]-[0-3] +intra ' "$work/report.txt")" -eq 2 ] || fail "not 2 pairs within a host"
grep -q '^concurrent: pairs 0-2 and 1-3 ' "$work/report.txt" || fail "no concurrent pairs"
show=$("$topo" show "$work/probed.json") || fail "tuccl-topo show cannot read it"
echo "$show"
echo "$show" | grep -q '^nodes 2, GPUs 4, NICs 2, ' || fail "not 2 nodes, 4 GPUs, 2 NICs"
"$sim" "$algorithm" --topo "$work/probed.json" --sizes 1M:4M > "$work/sim.txt" || fail "tuccl-sim cannot read it"
grep -q '^# AllReduce .* on probed: 4 ranks, 2 nodes' "$work/sim.txt" || fail "tuccl-sim did not simulate on it"

TUCCL_TEST_SLOW_PAIR=1,2 "$run" -n 4 --ranks-per-node 2 --timeout 240 -- "$topo" probe -o "$work/slow.json" \
  --report "$work/slow.txt" --latency-iters 10 --bandwidth-iters 2 --bytes 1M || fail "the probe with a slow pair failed"
cat "$work/slow.txt"
grep -q '^flagged: pair 1-2: slow' "$work/slow.txt" || fail "the slow pair 1-2 is not flagged"

out=$(TUCCL_TEST_SLOW_PAIR=1,1 "$run" -n 2 --timeout 120 -- "$topo" probe -o "$work/bad.json" 2>&1)
status=$?
[ "$status" -eq 2 ] || { echo "$out"; fail "a bad TUCCL_TEST_SLOW_PAIR: exit $status, not 2"; }
echo "$out" | grep -q "TUCCL_TEST_SLOW_PAIR='1,1'" || { echo "$out"; fail "the bad value is not named"; }
# Hosts interleaved (rank r on host r % 2): the topology numbers ranks host by host, so it is refused.
out=$("$run" -n 4 --timeout 120 -- sh -c 'TUCCL_HOSTID=h$((TUCCL_RANK % 2)) exec "$0" probe -o "$1"' "$topo" \
  "$work/interleaved.json" 2>&1)
status=$?
[ "$status" -eq 2 ] || { echo "$out"; fail "interleaved hosts: exit $status, not 2"; }
echo "$out" | grep -q 'is on an earlier host than rank' || { echo "$out"; fail "interleaved hosts: no reason"; }
[ ! -e "$work/interleaved.json" ] || fail "interleaved hosts: a topology was written"
out=$("$run" -n 2 --timeout 120 -- "$topo" probe -o "$work/probed.json" 2>&1)
[ $? -eq 2 ] && echo "$out" | grep -q "probed.json" || { echo "$out"; fail "an existing output was not refused"; }
if [ -n "$driver" ]; then
  TUCCL_DEVICE=cuda TUCCL_CUDA_DRIVER=$driver TUCCL_KERNELGEN_CACHE="$work/kernels" LD_PRELOAD=$nvrtc \
    "$run" -n 4 --ranks-per-node 2 --timeout 240 -- "$topo" probe -o "$work/cuda.json" --report "$work/cuda.txt" \
    --latency-iters 20 --bytes 256K --bandwidth-iters 2 || fail "the probe on the CUDA device failed"
  cat "$work/cuda.txt"
  [ "$(grep -cE '^[0-3]-[0-3] +(intra|inter) ' "$work/cuda.txt")" -eq 6 ] || fail "CUDA device: not 6 pairs"
  "$topo" show "$work/cuda.json" | grep -q '^nodes 2, GPUs 4, NICs 2, ' || fail "CUDA device: its topology does not load"
fi
rm -rf "$work"
echo OK
