#!/usr/bin/env bash
# The tuned TuCCL choice beside what NCCL would do, in the simulator, on multi-NIC presets: for
# each preset and node count, tuccl-tune (profiler sim, MRACO over the generators', the
# synthesiser's and the example programs' candidates) tunes AllGather and AllReduce over a size
# grid, and its summary row per table entry is printed with NCCL's time and choice and xNCCL,
# NCCL's time over the tuned time. NCCL's time is its plan for the NCCL model's choice, simulated
# by the same engine as the candidates (tune/nccl_baseline.h); model(us) is the model's own time.
#
# Per table entry (a range of sizes with one winner, shown by its first size):
#   chosen, time, xNCCL   what the table keeps (NCCL's own choice, "nccl", where it is faster) and
#                         NCCL's simulated time over it (>= 1.00)
#   best candidate, xNCCL the fastest of TuCCL's own candidates and NCCL's simulated time over it
#
# Usage: bench/tuned_vs_nccl.sh [--build DIR] [--presets "resccl-a100 dgx-a100 dgx-h100 ndv2"]
#          [--nodes "2 4"] [--sizes 1K:1G] [--factor 16] [--seed 1] [--out DIR]
# Every run's table and trial log are kept in the output directory (default: a fresh temporary one).
set -euo pipefail

build=build
presets="resccl-a100 dgx-a100 dgx-h100 ndv2"
nodes="2 4"
sizes=1K:1G
factor=16
seed=1
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --presets) presets=$2; shift 2 ;;
    --nodes) nodes=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --factor) factor=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "tuned_vs_nccl.sh: unknown argument '$1' (--help)" >&2; exit 2 ;;
  esac
done
tune="$build/tools/tuccl-tune"
if [ ! -x "$tune" ]; then
  echo "tuned_vs_nccl.sh: $tune is not built (cmake --build $build)" >&2
  exit 2
fi
if [ -z "$out" ]; then out=$(mktemp -d -t tuccl-tuned-vs-nccl.XXXXXX); fi
mkdir -p "$out"

# One row per table entry from the table's metadata (tune/tuning_run.cc rangeMetadata): the
# entry's time, the best candidate's (its config names it), NCCL's simulated time and choice, and
# the NCCL model's time.
report() {
  python3 - "$1" "$2" "$3" <<'PY'
import json, sys
path, preset, nodes = sys.argv[1], sys.argv[2], sys.argv[3]
doc = json.load(open(path))
def size(b):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if b >= 1 << shift and b % (1 << shift) == 0: return f"{b >> shift}{unit}"
    return str(b)
for t, e in zip(doc["entries"], doc["metadata"]["tuccl"]["entries"]):
    first = e["sizes"][0]
    cand = e["config"].get("algorithm", "-")
    print(f"{preset:<12} {nodes:>5}  {t['collective']:<10}"
          f"{size(first):>6}  {e['algorithm']:<18} {e['timeUs']:>10.1f} {e['ncclUs']:>10.1f} "
          f"{e['ncclChoice']:<18} {e['ncclUs'] / e['timeUs']:>6.2f}x  {cand:<18} {e['bestCandidateUs']:>10.1f} "
          f"{e['ncclUs'] / e['bestCandidateUs']:>6.2f}x {e['ncclModelUs']:>10.1f}")
PY
}

printf '%-12s %5s  %-10s%6s  %-18s %10s %10s %-18s %7s  %-18s %10s %7s %10s\n' preset nodes collective from \
  chosen 'time(us)' 'nccl-sim' "NCCL's choice" xNCCL 'best candidate' 'cand(us)' 'xNCCL' 'model(us)'
status=0
for preset in $presets; do
  for n in $nodes; do
    tag="$preset-$n"
    if ! "$tune" --topo "preset:$preset:nodes=$n" --collectives allgather,allreduce --sizes "$sizes" -f "$factor" \
         --seed "$seed" -q --force -o "$out/$tag.json" > "$out/$tag.txt" 2>&1; then
      echo "tuned_vs_nccl.sh: tuccl-tune failed on $tag (see $out/$tag.txt)" >&2
      status=1
      continue
    fi
    report "$out/$tag.json" "$preset" "$n"
  done
done
echo "# runs kept in $out"
exit $status
