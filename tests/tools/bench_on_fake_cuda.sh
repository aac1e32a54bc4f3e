#!/bin/sh
# tuccl-bench on the CUDA device of the recording fake driver, whose real CUBINs are recorded but
# never run: tuccl-bench allocates its buffers and stream through the driver, its first collective
# never finishes, and that comes back as the communicator's asynchronous error with its reason:
# exit 1, within tuccl-run's timeout.
# Usage: bench_on_fake_cuda.sh TUCCL_RUN TUCCL_BENCH FAKE_DRIVER CACHE_DIR
set -u
run=$1 bench=$2 driver=$3 cache=$4
out=$(TUCCL_DEVICE=cuda TUCCL_CUDA_DRIVER=$driver TUCCL_CACHE_DIR=$cache \
  "$run" -n 2 --timeout 120 -- "$bench" allreduce -b 8 -e 8 -n 1 -w 0 -c 0 2>&1)
status=$?
echo "$out"
if [ "$status" -ne 1 ]; then echo "expected exit status 1, got $status"; exit 1; fi
echo "$out" | grep -q 'asynchronous error: .*never finished' || { echo "no asynchronous error with its reason"; exit 1; }
