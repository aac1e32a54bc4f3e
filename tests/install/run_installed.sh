#!/usr/bin/env bash
# The checks of install_test.sh, run against an install prefix only (the source and build trees
# hidden, the environment scrubbed): the tools on the bundled programs, and two consumers.
#
# usage: run_installed.sh PREFIX WORK_DIR CMAKE CXX GENERATOR MAKE_PROGRAM HAVE_CUDA
set -euo pipefail

prefix=$1 work=$2 cmake=$3 cxx=$4 generator=$5 make_program=$6 have_cuda=$7
bin=$prefix/bin
examples=$prefix/share/tuccl/examples
cd "$work"
# A fresh host-build cache: --verify must compile the kernels from the prefix's embedded headers.
export TUCCL_KERNELGEN_CACHE=$work/kernel-cache

step() { echo "-- $*"; }

step "tuccl-compile --check (the embedded program)"
"$bin/tuccl-compile" --check > check.txt
grep -q "collective   AllReduce" check.txt

step "tuccl-compile --verify (host build with the host compiler, from the prefix)"
"$bin/tuccl-compile" "$examples/algorithms/hm_allreduce.resccl" --param nRanks=8 --param GPUPerNode=4 --verify \
  --count 4099 --seed 7 > verify.txt
cat verify.txt
ls "$TUCCL_KERNELGEN_CACHE"/*/device/primitives.h > /dev/null

if [ "$have_cuda" = 1 ]; then
  step "tuccl-compile -o --arch sm_90 (NVRTC with the embedded headers)"
  "$bin/tuccl-compile" "$examples/algorithms/ring_allreduce.resccl" --param nRanks=4 --param GPUPerNode=4 -o nvrtc --arch sm_90 > /dev/null
  ls nvrtc/*sm_90*.cubin > /dev/null
fi

step "tuccl-sim on a bundled program"
"$bin/tuccl-sim" "$examples/algorithms/hm_allreduce.resccl" --topo preset:resccl-a100:nodes=2 --sizes 8M:64M > sim.txt
cat sim.txt
grep -q "busbw" sim.txt

step "tuccl-topo, tuccl-table on bundled data"
"$bin/tuccl-topo" show preset:resccl-a100:nodes=2 > /dev/null
"$bin/tuccl-table" validate "$examples/tables/h100_2x8.json"

step "tuccl-tune with its default --examples (the bundled programs beside the program)"
"$bin/tuccl-tune" --topo preset:resccl-a100:nodes=2,gpus=4 --collectives allreduce --sizes 64K:64K --schedulers hpds \
  --budget 1000 --seed 3 -q -o tune/table.json
"$bin/tuccl-table" validate tune/table.json

step "libtuccl: the C example built with pkg-config tuccl, run as two ranks by tuccl-run"
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
pkg-config --exists --print-errors tuccl
# shellcheck disable=SC2046  # pkg-config's flags are words
cc "$examples/libtuccl/allreduce.c" -o allreduce $(pkg-config --cflags --libs tuccl)
TUCCL_DEVICE=cpu "$bin/tuccl-run" -n 2 --timeout 300 -- ./allreduce > allreduce.txt
cat allreduce.txt
grep -q "rank 1 of 2: ok" allreduce.txt

step "find_package(TuCCL) consumer"
"$cmake" -S ../consumer -B consumer-cmake -G "$generator" -DCMAKE_MAKE_PROGRAM="$make_program" \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release > consumer-cmake.log ||
  { cat consumer-cmake.log; exit 1; }
"$cmake" --build consumer-cmake > consumer-build.log || { cat consumer-build.log; exit 1; }
consumer-cmake/consumer "$examples/algorithms/hm_allreduce.resccl"

step "pkg-config tuccl-stages consumer"
pkg-config --exists --print-errors tuccl-stages
# shellcheck disable=SC2046  # pkg-config's flags are words
"$cxx" -std=c++20 ../consumer/main.cc -o consumer-pc $(pkg-config --cflags --libs tuccl-stages)
./consumer-pc "$examples/algorithms/ring_allreduce.resccl"
