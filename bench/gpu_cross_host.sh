#!/usr/bin/env bash
# libtuccl's CUDA device between hosts, on ONE NVIDIA GPU: 4 rank processes sharing the GPU (the
# CUDA MPS daemon this script starts), as one host of 4 (1 x 4: GPU memory and CUDA IPC only) and
# as two hosts of 2 (2 x 2, TUCCL_HOSTID per host: the rings across them stage through pinned host
# memory and TuCCL's socket net plugin over loopback). Every collective, float, sum, 8 B .. 64 MB,
# every element checked: a busbw table, 1 x 4 beside 2 x 2, then the 8-byte latency of both.
# Then it tries to add a Soft-RoCE device (rdma_rxe over the first non-loopback interface); where
# it can, the 2 x 2 AllReduce runs again over verbs (TUCCL_NET plugin IB), and the script says what
# it saw either way.
#
# usage: [MAXBYTES=64M] bench/gpu_cross_host.sh BUILD_DIR   (fits in 5 minutes; each run bounded)
set -uo pipefail
max=${MAXBYTES:-64M}  # the largest size of the busbw table
build=${1:?usage: bench/gpu_cross_host.sh BUILD_DIR}
run="$build/tools/tuccl-run"
bench="$build/tools/tuccl-bench"
[ -x "$run" ] && [ -x "$bench" ] || { echo "no tuccl-run / tuccl-bench in $build" >&2; exit 2; }
work=$(mktemp -d)
cleanup() {
  [[ -n ${mps_started:-} ]] && echo quit | nvidia-cuda-mps-control > /dev/null 2>&1
  [[ -n ${rxe_added:-} ]] && rdma link delete rxe_tuccl > /dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
export CUDA_MPS_PIPE_DIRECTORY=$work/mps CUDA_MPS_LOG_DIRECTORY=$work/mps-log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
if nvidia-cuda-mps-control -d 2> /dev/null; then mps_started=1; else echo "# MPS did not start: the ranks take turns on the GPU"; fi
export TUCCL_DEVICE=cuda TUCCL_CACHE_DIR=$work/cache TUCCL_TIMEOUT_S=60 TUCCL_SOCKET_IFNAME=lo
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2> /dev/null | sed 's/^/# GPU: /'

# "size busbw wrong" per row of one run (out of place), or a FAILED line.
rows() {
  local label=$1 collective=$2
  shift 2
  if ! timeout 100 "$run" "$@" --timeout 90 -- "$bench" "$collective" -b 8 -e "$max" -f 8 -n 5 -w 2 -c 1 \
    > "$work/$label-$collective.txt" 2>&1; then
    echo "FAILED $(grep -m1 -i error "$work/$label-$collective.txt")"
    return
  fi
  awk '!/^#/ && NF == 13 { print $1, $8, $9 }' "$work/$label-$collective.txt"
}

echo "## busbw (GB/s), out of place, 4 ranks on one GPU: one host (1 x 4) beside two hosts (2 x 2)"
printf '%-14s %10s %10s %10s %8s\n' collective bytes "1x4" "2x2" wrong
for collective in allreduce allgather reducescatter alltoall broadcast reduce sendrecv; do
  one=$(rows one "$collective" -n 4)
  two=$(rows two "$collective" -n 4 --ranks-per-node 2)
  if [[ $one == FAILED* || $two == FAILED* ]]; then
    printf '%-14s 1x4: %s | 2x2: %s\n' "$collective" "${one:0:120}" "${two:0:120}"
    continue
  fi
  paste -d' ' <(echo "$one") <(echo "$two") |
    awk -v c="$collective" '{ printf "%-14s %10d %10.2f %10.2f %8d\n", c, $1, $2, $5, $3 + $6 }'
done

echo "## 8-byte AllReduce latency (us, in place, mean over ranks)"
for layout in "-n 4" "-n 4 --ranks-per-node 2"; do
  # shellcheck disable=SC2086
  t=$(timeout 60 "$run" $layout --timeout 50 -- "$bench" allreduce -b 8 -e 8 -n 1000 -w 50 -c 1 2>&1 |
    awk '!/^#/ && NF == 13 { print $10 " us, wrong " $13 }')
  echo "tuccl-run $layout: ${t:-FAILED}"
done

echo "## Soft-RoCE"
netdev=$(ip -o link show up 2> /dev/null | awk -F': ' '$2 != "lo" { print $2; exit }' | cut -d@ -f1)
if ! modprobe rdma_rxe 2> "$work/rxe.err"; then
  echo "rdma_rxe does not load: $(head -n1 "$work/rxe.err")"
elif [[ -z $netdev ]]; then
  echo "no network interface besides lo to put rxe on"
elif ! rdma link add rxe_tuccl type rxe netdev "$netdev" 2> "$work/rxe.err"; then
  echo "rdma link add on $netdev failed: $(head -n1 "$work/rxe.err")"
else
  rxe_added=1
  echo "rxe_tuccl on $netdev"
  TUCCL_NET=IB TUCCL_IB_HCA=rxe_tuccl TUCCL_SOCKET_IFNAME=$netdev timeout 100 "$run" -n 4 --ranks-per-node 2 --timeout 90 -- \
    "$bench" allreduce -b 8 -e 64M -f 8 -n 5 -w 2 -c 1 2>&1 | grep -v '^#  Rank' | tail -n 12
fi
