#!/usr/bin/env bash
# Small-call latency between hosts against one host, in one run: tuccl-bench AllReduce (in place,
# the mean over ranks of the time per call) on the CPU device, as
#   1 x 4   one host of 4 ranks (shared memory only)
#   2 x 2   two hosts of 2 ranks (TUCCL_HOSTID per host; rings across them through the inter-node
#           proxies and TuCCL's socket net plugin over loopback)
# and, as the floor loopback TCP sets, 1 x 2 against 2 x 1 (one exchange across the hosts, nothing
# else). ratio = 2 x 2 / 1 x 4. Every rank's result is checked (-c 1); the times include the
# host's scheduling of every rank's threads on the cores this machine has (nproc is printed).
#
# usage: bench/cross_host_latency.sh BUILD_DIR [ITERS]
set -euo pipefail
build=${1:?usage: bench/cross_host_latency.sh BUILD_DIR [ITERS]}
iters=${2:-500}
run="$build/tools/tuccl-run"
bench="$build/tools/tuccl-bench"
[ -x "$run" ] && [ -x "$bench" ] || { echo "no tuccl-run / tuccl-bench in $build" >&2; exit 2; }

# The in-place time (us) of each size of one configuration: "size time" lines.
times() {
  TUCCL_DEVICE=cpu "$run" "$@" --timeout 600 -- "$bench" allreduce -b 8 -e 4K -f 8 -n "$iters" -w 50 -c 1 |
    awk '!/^#/ && NF == 13 { if ($13 != "0") { print "wrong elements: " $0 > "/dev/stderr"; exit 1 } print $1, $10 }'
}

echo "# cores: $(nproc); $iters calls per size"
one4=$(times -n 4)
two2=$(times -n 4 --ranks-per-node 2)
one2=$(times -n 2)
two1=$(times -n 2 --ranks-per-node 1)
printf '%8s %10s %10s %7s %10s %10s %7s\n' bytes "1x4 us" "2x2 us" ratio "1x2 us" "2x1 us" ratio
paste <(echo "$one4") <(echo "$two2") <(echo "$one2") <(echo "$two1") |
  awk '{ printf "%8d %10.2f %10.2f %7.1f %10.2f %10.2f %7.1f\n", $1, $2, $4, $4 / $2, $6, $8, $8 / $6 }'
