#!/bin/sh
# libtuccl's CUDA device end to end on a machine without a GPU: tuccl-bench under tuccl-run with
# the fake CUDA driver as the driver and the fake NVRTC preloaded, so every kernel the device
# compiles is a host build the fake driver runs, rank processes sharing staging through IPC
# handles. Every collective and point-to-point pattern x {float, bfloat16} x {sum, max} (the
# reductions) x every protocol (TUCCL_PROTO), in and out of place, 8 B - 1 MB (one tuccl-bench run
# per pattern and protocol, its types and operations as lists): exit status 0 and
# every checked element right (#wrong 0; N/A where tuccl-bench checks nothing, as sendrecv in place).
# Usage: bench_fake_cuda_matrix.sh TUCCL_RUN TUCCL_BENCH FAKE_DRIVER FAKE_NVRTC WORK_DIR [RUN_FLAGS...]
#   RUN_FLAGS go to tuccl-run (default: -n 4; e.g. -n 4 --ranks-per-node 2 for two hosts).
set -u
run=$1 bench=$2 driver=$3 nvrtc=$4 work=$5
shift 5
[ $# -gt 0 ] || set -- -n 4
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work" || fail "cannot make $work"
export TUCCL_DEVICE=cuda TUCCL_CUDA_DRIVER="$driver" TUCCL_CACHE_DIR="$work/cache" TUCCL_KERNELGEN_CACHE="$work/kernels"
export TUCCL_TIMEOUT_S=60
ranks=$(echo " $* " | sed -n 's/.* -n \([0-9][0-9]*\) .*/\1/p')
[ -n "$ranks" ] || fail "RUN_FLAGS must give the rank count as -n N"
runs=0
for proto in Simple LL LL128; do
  for collective in allreduce reducescatter reduce allgather broadcast alltoall sendrecv alltoallv; do
    # One run per pattern and protocol, every type (and operation) in it: a row per size (4),
    # type, operation and root (-r all: every rank is one for reduce and broadcast).
    # The operations asked for, and as the rows name them (none where the pattern reduces nothing).
    case $collective in
      allreduce | reducescatter | reduce) ops=sum,max shown="sum max" ;;
      *) ops=sum shown=none ;;
    esac
    case $collective in reduce | broadcast) perCombo=$((4 * ranks)) ;; *) perCombo=4 ;; esac
    out=$(TUCCL_PROTO=$proto LD_PRELOAD="$nvrtc" "$run" "$@" --timeout 240 -- \
      "$bench" "$collective" -b 8 -e 1M -f 32 -d float,bfloat16 -o $ops -r all -n 1 -w 0 -c 1 2>&1)
    status=$?
    what="$proto $collective float,bfloat16 $ops ($*)"
    [ "$status" -eq 0 ] || { echo "$out"; fail "$what: exit status $status"; }
    rows=$(echo "$out" | grep -v '^#' | grep -E '^ +[0-9]+ ')
    combos=0
    for type in float bfloat16; do
      for op in $shown; do
        echo "$rows" | awk -v t="$type" -v o="$op" -v want="$perCombo" '$3 == t && $4 == o { n++ } END { exit n != want }' ||
          { echo "$out"; fail "$what: not $perCombo rows of $type $op"; }
        combos=$((combos + 1))
      done
    done
    [ "$(echo "$rows" | grep -c .)" -eq $((perCombo * combos)) ] ||
      { echo "$out"; fail "$what: rows beyond the types and operations asked for"; }
    echo "$rows" | awk '$9 != "0" || ($13 != "0" && $13 != "N/A") { bad = 1; print "wrong: " $0 } END { exit bad }' ||
      { echo "$out"; fail "$what: wrong elements"; }
    echo "$out" | grep -q '^# Out of bounds values : 0 OK$' || { echo "$out"; fail "$what: the footer is not '0 OK'"; }
    runs=$((runs + 1))
  done
done
rm -rf "$work"
echo "OK: $runs runs, every element right"
