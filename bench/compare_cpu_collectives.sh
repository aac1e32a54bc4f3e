#!/usr/bin/env bash
# Compares libtuccl's CPU collectives with Gloo's and Open MPI's on this machine, in one run:
# AllReduce and AllGather (float, sum) over N ranks as processes, for sizes MIN..MAX, each library
# timed and checked by the same nccl-tests loop (cli/bench_driver.h):
#
#   tuccl   tuccl-run -n N -- tuccl-bench COLLECTIVE ...
#   gloo    tuccl-run -n N -- bench_gloo_collectives COLLECTIVE ...   (mpirun when no tuccl-run)
#   mpi     mpirun --oversubscribe -n N bench_mpi_collectives COLLECTIVE ...
#
# Prints per collective one table of the out-of-place columns (busbw in GB/s as nccl-tests defines
# it, time per call in µs) and the 8-byte AllReduce latency of each library. A library whose
# program is not built is left out ("-"); one that fails (a wrong result, a crash) is reported and
# makes the script exit 1. Every run's full output is kept in the output directory.
#
# Usage: bench/compare_cpu_collectives.sh [--build DIR] [-n RANKS] [-b MIN] [-e MAX] [-f FACTOR]
#          [--iters N] [--warmup N] [--check 0|1] [--latency-iters N] [--collectives "allreduce allgather"]
#          [--gloo-algorithm NAME] [--out DIR]
# Defaults: --build build, 4 ranks, 1K..256M, factor 2, 20 iterations, 5 warm-up, check 1,
# 1000 latency iterations, gloo's halving-doubling.
set -euo pipefail

build=build
ranks=4
min=1K
max=256M
factor=2
iters=20
warmup=5
check=1
latency_iters=1000
collectives="allreduce allgather"
gloo_algorithm=halving-doubling
out=""

usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    -n) ranks=$2; shift 2 ;;
    -b) min=$2; shift 2 ;;
    -e) max=$2; shift 2 ;;
    -f) factor=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --check) check=$2; shift 2 ;;
    --latency-iters) latency_iters=$2; shift 2 ;;
    --collectives) collectives=$2; shift 2 ;;
    --gloo-algorithm) gloo_algorithm=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "compare_cpu_collectives.sh: error: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

tuccl_run=$build/tools/tuccl-run
tuccl_bench=$build/tools/tuccl-bench
gloo_bench=$build/bench/bench_gloo_collectives
mpi_bench=$build/bench/bench_mpi_collectives
mpirun=(mpirun --oversubscribe -n "$ranks")
if [ "$(id -u)" -eq 0 ]; then mpirun+=(--allow-run-as-root); fi
if [ -z "$out" ]; then out=$(mktemp -d /tmp/tuccl-compare-XXXXXX); fi
mkdir -p "$out"

failed=0
# run LIBRARY NAME ARGS...: one benchmark run into $out/NAME.txt; nothing when the program is absent.
run() {
  local library=$1 name=$2
  shift 2
  local -a cmd
  case "$library" in
    tuccl)
      [ -x "$tuccl_bench" ] && [ -x "$tuccl_run" ] || return 0
      cmd=("$tuccl_run" -n "$ranks" -- "$tuccl_bench" "$@") ;;
    gloo)
      [ -x "$gloo_bench" ] || return 0
      if [ -x "$tuccl_run" ]; then
        cmd=("$tuccl_run" -n "$ranks" -- "$gloo_bench" "$@" --algorithm "$gloo_algorithm")
      else
        cmd=("${mpirun[@]}" "$gloo_bench" "$@" --algorithm "$gloo_algorithm")
      fi ;;
    mpi)
      [ -x "$mpi_bench" ] && command -v mpirun > /dev/null || return 0
      cmd=("${mpirun[@]}" "$mpi_bench" "$@") ;;
  esac
  echo "# running: ${cmd[*]}" >&2
  local status=0
  "${cmd[@]}" > "$out/$name.txt" 2>&1 || status=$?
  if [ "$status" -ne 0 ]; then
    echo "# $library failed (exit $status): see $out/$name.txt" >&2
    failed=1
  fi
}

# rows FILE: "size busbw time" of the out-of-place half of every result row.
rows() {
  [ -f "$1" ] || return 0
  awk '!/^#/ && NF >= 13 && $1 ~ /^[0-9]+$/ { print $1, $(NF-5), $(NF-7) }' "$1"
}

# table TITLE TUCCL GLOO MPI: the side-by-side table of three row files, joined on the size.
table() {
  echo "# $1"
  printf "# %10s  %12s  %12s  %12s  %12s  %12s\n" "size (B)" "tuccl busbw" "gloo busbw" "mpi busbw" \
    "tuccl (us)" "mpi (us)"
  awk '
    FNR == 1 { lib++ }
    $1 == "#" { next }
    { if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 }
      bw[lib, $1] = $2; t[lib, $1] = $3 }
    function cell(value) { return value == "" ? "-" : value }
    END {
      for (i = 1; i <= n; i++) {
        s = order[i]
        printf "  %10s  %12s  %12s  %12s  %12s  %12s\n", s, cell(bw[1, s]), cell(bw[2, s]), cell(bw[3, s]),
               cell(t[1, s]), cell(t[3, s])
      }
    }' <(echo "#"; rows "$2") <(echo "#"; rows "$3") <(echo "#"; rows "$4")
}

flags=(-b "$min" -e "$max" -f "$factor" -n "$iters" -w "$warmup" -c "$check" -d float -o sum)
for collective in $collectives; do
  for library in tuccl gloo mpi; do run "$library" "$library-$collective" "$collective" "${flags[@]}"; done
done
latency=(allreduce -b 8 -e 8 -n "$latency_iters" -w 100 -c "$check" -d float -o sum)
for library in tuccl gloo mpi; do run "$library" "$library-latency" "${latency[@]}"; done

echo "# CPU collectives, $ranks ranks on $(hostname) ($(nproc) cores), float sum, out of place;"
echo "# busbw as nccl-tests defines it (GB/s), time per call (us); outputs in $out"
for collective in $collectives; do
  table "$collective" "$out/tuccl-$collective.txt" "$out/gloo-$collective.txt" "$out/mpi-$collective.txt"
done
echo "# allreduce latency, 8 bytes, $latency_iters iterations (us, out of place / in place):"
for library in tuccl gloo mpi; do
  file=$out/$library-latency.txt
  row=$(awk '!/^#/ && NF >= 13 && $1 == 8 { print $(NF-7), "/", $(NF-3) }' "$file" 2> /dev/null || true)
  printf "#   %-6s %s\n" "$library" "${row:--}"
done
exit $failed
