#!/usr/bin/env bash
# PyTorch and nccl-tests on TuCCL through the NCCL drop-in, on ONE NVIDIA GPU. One table each.
#
#   (a) ddp       torchrun, N=4 processes sharing the GPU (the CUDA MPS daemon this script starts),
#                 bench/ddp_train.py for STEPS steps: once with backend nccl under
#                 LD_PRELOAD=libtuccl-nccl.so TUCCL_NCCL_FALLBACK=0 (TuCCL alone, no real NCCL), once
#                 with backend gloo on the CPU; per step both losses and their relative difference,
#                 then the largest difference (fp32: the two reduce in other orders, so they differ
#                 in the last bits and the curves drift apart slowly; within 1e-3 is a match).
#   (b) nccl-tests all_reduce_perf and sendrecv_perf (nccl-tests built against nccl.h, found in
#                 $NCCL_TESTS_DIR, built with MPI=1) under the drop-in, 2 and 4 processes on the GPU
#                 through mpirun: their own tables. Skipped, saying so, when $NCCL_TESTS_DIR holds no
#                 such build.
#
# usage: bench/gpu_dropin.sh BUILD_DIR [STEPS]   (BUILD_DIR: a TuCCL build with libtuccl-nccl.so)
set -euo pipefail
build=${1:?usage: bench/gpu_dropin.sh BUILD_DIR [STEPS]}
steps=${2:-300}
here=$(cd "$(dirname "$0")" && pwd)
dropin=$(cd "$build" && pwd)/backend/libtuccl-nccl.so
[[ -f $dropin ]] || { echo "no $dropin: build libtuccl-nccl first" >&2; exit 2; }
work=$(mktemp -d)
cleanup() {
  [[ -n ${mps_started:-} ]] && echo quit | nvidia-cuda-mps-control >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
export CUDA_MPS_PIPE_DIRECTORY=$work/mps CUDA_MPS_LOG_DIRECTORY=$work/mps-log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
if nvidia-cuda-mps-control -d 2>/dev/null; then mps_started=1; fi
export TUCCL_CACHE_DIR=$work/cache TUCCL_TIMEOUT_S=120

echo "## (a) DDP on 4 processes sharing one GPU: TuCCL (drop-in, no real NCCL) vs gloo, $steps steps"
port=$((29500 + RANDOM % 1000))
LD_PRELOAD=$dropin TUCCL_NCCL_FALLBACK=0 timeout 240 torchrun --nproc-per-node 4 --master-port $port \
  "$here/ddp_train.py" --backend nccl --steps "$steps" --device cuda > "$work/tuccl.txt" 2> "$work/tuccl.err" ||
  { echo "TuCCL run failed:"; tail -20 "$work/tuccl.err"; }
timeout 240 torchrun --nproc-per-node 4 --master-port $((port + 1)) "$here/ddp_train.py" --backend gloo \
  --steps "$steps" --device cpu > "$work/gloo.txt" 2> "$work/gloo.err" || { echo "gloo run failed:"; tail -20 "$work/gloo.err"; }
python3 - "$work/tuccl.txt" "$work/gloo.txt" <<'PY'
import sys
def losses(path):
    return {int(l.split()[1]): float(l.split()[3]) for l in open(path) if l.startswith("step ")}
t, g = losses(sys.argv[1]), losses(sys.argv[2])
print("| step | TuCCL loss | gloo loss | rel. diff |\n|---:|---:|---:|---:|")
worst = 0.0
for s in sorted(set(t) & set(g)):
    d = abs(t[s] - g[s]) / max(abs(g[s]), 1e-12)
    worst = max(worst, d)
    if s < 5 or s % 50 == 0 or s == max(g):
        print(f"| {s} | {t[s]:.6g} | {g[s]:.6g} | {d:.2e} |")
print(f"\nsteps compared: {len(set(t) & set(g))} of {len(g)}; largest relative difference {worst:.2e} "
      f"({'match' if worst <= 1e-3 and len(t) == len(g) > 0 else 'MISMATCH'})")
PY

echo
echo "## (b) nccl-tests through the drop-in"
tests_dir=${NCCL_TESTS_DIR:-}
if [[ -z $tests_dir || ! -x $tests_dir/all_reduce_perf ]]; then
  echo "skipped: no nccl-tests build in NCCL_TESTS_DIR (${tests_dir:-unset})"
  exit 0
fi
for test in all_reduce_perf sendrecv_perf; do
  for n in 2 4; do
    echo "### $test, $n ranks"
    if command -v mpirun >/dev/null && ldd "$tests_dir/$test" | grep -q libmpi; then
      LD_PRELOAD=$dropin TUCCL_NCCL_FALLBACK=0 timeout 120 mpirun --allow-run-as-root -np $n -x LD_PRELOAD \
        -x TUCCL_NCCL_FALLBACK -x TUCCL_CACHE_DIR "$tests_dir/$test" -b 8 -e 256M -f 4 -g 1 || echo "($test failed)"
    else
      echo "skipped: several ranks on one GPU need nccl-tests built with MPI=1 (one process per rank)"
    fi
  done
done
