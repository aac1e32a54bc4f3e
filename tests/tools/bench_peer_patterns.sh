#!/bin/sh
# tuccl-bench sendrecv and alltoallv end to end, on the CPU device with 4 ranks: exit status 0,
# nccl-tests' header, one row per size with the redop "none" and the root -1, every out-of-place
# element checked and right (#wrong 0), the in-place half timed but not checked (N/A, as
# nccl-tests' sendrecv), and the footer "0 OK".
# Usage: bench_peer_patterns.sh TUCCL_RUN TUCCL_BENCH
set -u
run=$1 bench=$2
fail() { echo "FAIL: $*"; exit 1; }
for pattern in sendrecv alltoallv; do
  out=$(TUCCL_DEVICE=cpu "$run" -n 4 --timeout 240 -- "$bench" "$pattern" -b 1K -e 1M -f 4 -n 5 -w 1 -c 1 2>&1)
  status=$?
  echo "$out"
  [ "$status" -eq 0 ] || fail "$pattern: exit status $status"
  echo "$out" | grep -q '^# nThread 1 nGpus 1 minBytes 1024 maxBytes 1048576 step: 4(factor) warmup iters: 1 iters: 5 agg iters: 1 validation: 1 graph: 0$' ||
    fail "$pattern: no run header"
  [ "$(echo "$out" | grep -c '^#  Rank  [0-3] Group  0 Pid ')" -eq 4 ] || fail "$pattern: not 4 '# Rank' lines"
  echo "$out" | grep -q '^#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong$' ||
    fail "$pattern: no column header"
  echo "$out" | grep -q '^# Out of bounds values : 0 OK$' || fail "$pattern: the footer is not '0 OK'"
  echo "$out" | grep -q '^# Avg bus bandwidth    : ' || fail "$pattern: no average bus bandwidth"
  # The rows, 1K 4K 16K 64K 256K 1M: size, count, float, none, -1, then each half's four columns.
  rows=$(echo "$out" | grep -v '^#' | grep -E '^ +[0-9]+ ')
  [ "$(echo "$rows" | wc -l)" -eq 6 ] || fail "$pattern: not 6 rows"
  echo "$rows" | awk -v pattern="$pattern" '
    {
      n = 4; count = $1 / 4
      if (pattern == "alltoallv") { count = int(count / n); size = count * n * 4 } else size = $1
      if (NF != 13) { print "fields: " $0; bad = 1 }
      if ($1 != size || $2 != count || $3 != "float" || $4 != "none" || $5 != -1) { print "columns: " $0; bad = 1 }
      if ($9 != 0) { print "out-of-place #wrong: " $0; bad = 1 }
      if ($13 != "N/A") { print "in-place #wrong: " $0; bad = 1 }
      # Times are positive; a bandwidth printed to two decimals may read 0.00 for a slow small call.
      if (!($6 > 0 && $10 > 0 && $7 >= 0 && $8 >= 0 && $11 >= 0 && $12 >= 0)) { print "times and bandwidths: " $0; bad = 1 }
      # busbw = algbw (sendrecv) or algbw x 3/4 (alltoallv), to the printed two decimals.
      factor = pattern == "sendrecv" ? 1 : 0.75
      if ($8 - $7 * factor > 0.011 || $7 * factor - $8 > 0.011) { print "busbw: " $0; bad = 1 }
      expected = 1024 * 4 ^ (NR - 1)
      if ($1 != expected) { print "size " $1 " is not " expected; bad = 1 }
    }
    END { exit bad }' || fail "$pattern: a row is off"
done
echo "OK"
