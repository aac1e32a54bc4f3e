#!/usr/bin/env bash
# The SASS census (tools/sass_census.py) of every example's kernels, compiled by tuccl-compile with
# NVRTC for sm_90 — each kernel holds every protocol and datatype (both are run-time values), so
# every data and poll loop of Simple, LL and LL128, fp32, bf16 and fp16 is checked — and a
# self-test: a planted kernel with a one-load copy loop, a spill and a fenced poll loop must fail.
#
# Usage: sass_census_examples.sh TUCCL_COMPILE SOURCE_DIR WORK_DIR [NVCC [EXAMPLE...]]
# EXAMPLEs (names in examples/algorithms, without .resccl) limit the census to those; by default
# every example.
# Exits 77 (skipped) when no cuobjdump is found: $TUCCL_CUOBJDUMP, PATH, or the venv that
# .ci/install-deps makes (SOURCE_DIR/.venv-tools).
set -euo pipefail
compile=$1 source=$2 work=$3 nvcc=${4:-}
shift $(( $# < 4 ? $# : 4 ))
examples=()
for name in "$@"; do
  [ -f "$source/examples/algorithms/$name.resccl" ] || { echo "no example $name in $source/examples/algorithms"; exit 1; }
  examples+=("$source/examples/algorithms/$name.resccl")
done
[ ${#examples[@]} -gt 0 ] || examples=("$source"/examples/algorithms/*.resccl)
cuobjdump=${TUCCL_CUOBJDUMP:-}
if [ -z "$cuobjdump" ]; then cuobjdump=$(command -v cuobjdump || true); fi
if [ -z "$cuobjdump" ]; then
  cuobjdump=$(ls "$source"/.venv-tools/lib/python3*/site-packages/nvidia/cu*/bin/cuobjdump 2>/dev/null | head -n 1 || true)
fi
if [ -z "$cuobjdump" ] || [ ! -x "$cuobjdump" ]; then
  echo "SKIPPED: no cuobjdump (set TUCCL_CUOBJDUMP, or run .ci/install-deps, which installs PyPI's" \
       "nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm into $source/.venv-tools)"
  exit 77
fi
# cuobjdump -sass runs the nvdisasm beside it.
export PATH="$(dirname "$cuobjdump"):$PATH"
census="python3 $source/tools/sass_census.py --cuobjdump $cuobjdump"
rm -rf "$work/out"
mkdir -p "$work/out" "$work/cache"
status=0
for example in "${examples[@]}"; do
  name=$(basename "$example" .resccl)
  if ! TUCCL_KERNELGEN_CACHE="$work/cache" "$compile" "$example" -o "$work/out/$name" --arch sm_90 > "$work/out/$name.log" 2>&1; then
    echo "$name: tuccl-compile failed:"; cat "$work/out/$name.log"; exit 1
  fi
  $census "$work/out/$name"/*.sm_90.cubin || status=1
done

# The self-test: the census must catch each planted fault.
if [ -n "$nvcc" ]; then
  cat > "$work/planted.cu" <<'CU'
namespace tuccl { namespace dev {
// One 16-byte load in flight per thread, a fenced poll loop, and a spilled array in a data loop.
__device__ __noinline__ void reduceCopy(uint4* dst, const uint4* src, long n, volatile unsigned long long* flag,
                                        int k) {
  while (*flag == 0) __threadfence_system();
  for (long i = threadIdx.x; i < n; i += blockDim.x) {
    volatile int spill[64];
    spill[(i + k) & 63] = src[i].x;
    uint4 v = src[i];
    v.x += spill[k & 63];
    dst[i] = v;
  }
}
}}
extern "C" __global__ void planted(uint4* dst, const uint4* src, long n, unsigned long long* flag, int k) {
  tuccl::dev::reduceCopy(dst, src, n, flag, k);
}
CU
  "$nvcc" -cubin -arch=sm_90 -o "$work/planted.cubin" "$work/planted.cu"
  if planted=$($census "$work/planted.cubin"); then
    echo "self-test: the census passed a planted kernel:"; echo "$planted"; exit 1
  fi
  echo "$planted"
  for fault in "fewer than 8" "local memory" "system fence"; do
    if ! grep -q "$fault" <<< "$planted"; then echo "self-test: the census missed: $fault"; status=1; fi
  done
fi
exit $status
