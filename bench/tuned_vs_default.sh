#!/usr/bin/env bash
# Does tuning win where it can be measured? TuCCL's CPU device, N ranks on this machine, AllReduce.
#
#   (a) table   a tuning table against the built-in defaults: alternating runs of tuccl-bench with
#               TUCCL_TUNER_TABLE=<table> and without, TUCCL_ADAPT=0 in both (--table FILE, or
#               --tune to make one for the same sizes with tuccl-tune --profiler tuccl --ranks N first,
#               whose summary is printed; skipped with neither)
#   (b) adapt   the runtime phase on against off (TUCCL_ADAPT=1 / 0), alternating, nothing slowed
#   (c) slowed  the runtime phase with the default configuration group made twice as slow
#               (TUCCL_TEST_DELAY_GROUP=0:<its own time>, --slowed-iters calls, the first agreement
#               at once: TUCCL_ADAPT_FIRST=0), against the slowed default itself (the same delay,
#               no agreement ever due), and the group the learned table says it settled on
#               (group 0 is the default, so "1" found the other)
#
# Every run is one tuccl-bench over all sizes (-n ITERS timed calls per size, in place). Per size:
# the time ratio (first / second: tuned / default, on / off) as the geometric mean over the pairs
# with its 95 % interval (Student t on the log ratios), and the pairs the first won. A ratio whose
# interval lies below 1 is a significant win, above 1 a significant loss.
#
# Usage: bench/tuned_vs_default.sh [--build DIR] [--ranks N] [--sizes 16:4M] [--factor 4]
#          [--iters 500] [--pairs 8] [--table FILE | --tune [--tune-budget N]] [--no-adapt]
#          [--slowed "4K 64K"] [--slowed-iters 2000]
# Needs python3 (the statistics). Wall time: a few minutes at the defaults on 2 cores.
set -euo pipefail

build=build
ranks=4
sizes=16:4M
factor=4
iters=500
pairs=8
table=""
tune=0
tune_budget=40
adapt=1
slowed="4K 64K"
slowed_iters=2000
die() { echo "tuned_vs_default.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --factor) factor=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --pairs) pairs=$2; shift 2 ;;
    --table) table=$2; shift 2 ;;
    --tune) tune=1; shift ;;
    --tune-budget) tune_budget=$2; shift 2 ;;
    --no-adapt) adapt=0; shift ;;
    --slowed) slowed=$2; shift 2 ;;
    --slowed-iters) slowed_iters=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (--help)" ;;
  esac
done
for v in "$ranks" "$iters" "$pairs" "$factor" "$tune_budget" "$slowed_iters"; do
  [[ "$v" =~ ^[0-9]+$ && "$v" -ge 1 ]] || die "'$v' is not a positive whole number"
done
[ "$pairs" -ge 2 ] || die "--pairs must be at least 2 (an interval needs two)"
[[ "$sizes" =~ ^[0-9]+[KMG]?:[0-9]+[KMG]?$ ]] || die "--sizes takes MIN:MAX, not '$sizes'"
[ -z "$table" ] || [ -f "$table" ] || die "--table $table: no such file"
[ -z "$table" ] || [ "$tune" = 0 ] || die "--table and --tune exclude each other"
for tool in tuccl-run tuccl-bench tuccl-tune; do
  [ -x "$build/tools/$tool" ] || die "$build/tools/$tool is not built (cmake --build $build)"
done
command -v python3 > /dev/null || die "python3 is needed for the statistics"

work=$(mktemp -d -t tuccl-tuned-vs-default.XXXXXX)
trap 'rm -rf "$work"' EXIT
min=${sizes%%:*}
max=${sizes##*:}
common=(TUCCL_DEVICE=cpu TUCCL_TIMEOUT_S=120 TUCCL_CACHE_DIR="$work/cache")

# bench NAME ENV...: one tuccl-bench run over every size; its output in $work/NAME.out.
bench() {
  local name=$1
  shift
  env "${common[@]}" "$@" "$build/tools/tuccl-run" -n "$ranks" -- \
    "$build/tools/tuccl-bench" allreduce -b "$min" -e "$max" -f "$factor" -n "$iters" -w 20 -c 0 \
    > "$work/$name.out" 2> "$work/$name.err" || {
    echo "tuned_vs_default.sh: the run $name failed:" >&2
    tail -n 20 "$work/$name.err" >&2
    exit 1
  }
}

# The runs compared: NAME.<i> for pair i.
run_tuned() { bench "tuned.$1" TUCCL_ADAPT=0 TUCCL_TUNER_TABLE="$table"; }
run_default() { bench "default.$1" TUCCL_ADAPT=0; }
run_on() { bench "on.$1" TUCCL_ADAPT=1 TUCCL_ADAPT_FILE="$work/learned-b-$1.json"; }
run_off() { bench "off.$1" TUCCL_ADAPT=0; }

# alternate FIRST SECOND: $pairs pairs of runs, FIRST first in the even pairs, SECOND in the odd
# (a drift in the machine's speed falls on both alike).
alternate() {
  local i
  for i in $(seq 0 $((pairs - 1))); do
    if [ $((i % 2)) = 0 ]; then "run_$1" "$i"; "run_$2" "$i"; else "run_$2" "$i"; "run_$1" "$i"; fi
  done
}

# compare TITLE FIRST SECOND: the table of ratios FIRST/SECOND over runs FIRST.<i> and SECOND.<i>.
compare() {
  python3 - "$work" "$1" "$2" "$3" "$pairs" <<'PY'
import math, sys
work, title, first, second, pairs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])

def times(path):
    """size -> in-place time (us) of a tuccl-bench output (nccl-tests' columns)."""
    out = {}
    for line in open(path):
        f = line.split()
        if len(f) >= 13 and f[0].isdigit():
            out[int(f[0])] = float(f[-4])
    return out

# Student t quantiles (0.975) for 1..30 degrees of freedom; 1.96 beyond.
T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
        2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
        2.045, 2.042]
a = [times(f"{work}/{first}.{i}.out") for i in range(pairs)]
b = [times(f"{work}/{second}.{i}.out") for i in range(pairs)]
sizes = sorted(set.intersection(*(set(x) for x in a + b)))
print(f"## {title}: {first} / {second}, {pairs} alternating pairs, in-place time per call")
print(f"{'size':>9} {first + ' us':>12} {second + ' us':>12} {'ratio':>7} {'95% interval':>17} {'wins':>6}  verdict")
significant_wins = 0
for s in sizes:
    logs = [math.log(a[i][s] / b[i][s]) for i in range(pairs)]
    mean = sum(logs) / pairs
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (pairs - 1))
    half = (T975[pairs - 2] if pairs - 1 <= len(T975) else 1.96) * sd / math.sqrt(pairs)
    lo, hi, r = math.exp(mean - half), math.exp(mean + half), math.exp(mean)
    wins = sum(1 for i in range(pairs) if a[i][s] < b[i][s])
    ta = sorted(x[s] for x in a)[pairs // 2]
    tb = sorted(x[s] for x in b)[pairs // 2]
    verdict = "faster" if hi < 1 else "slower" if lo > 1 else "tie"
    significant_wins += hi < 1
    label = f"{s}B" if s < 1024 else f"{s // 1024}K" if s < 1 << 20 else f"{s >> 20}M"
    print(f"{label:>9} {ta:>12.1f} {tb:>12.1f} {r:>7.3f} {f'[{lo:.3f}, {hi:.3f}]':>17} {f'{wins}/{pairs}':>6}  {verdict}")
print(f"# significant wins (interval below 1): {significant_wins} of {len(sizes)} sizes")
print()
PY
}

echo "# tuned_vs_default.sh: $ranks ranks on the CPU device, AllReduce float $min..$max (x$factor), $iters calls" \
     "per size and run, $pairs pairs; $(nproc) cores, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo

# ---- (a) a table against the defaults ----------------------------------------------------------------
if [ "$tune" = 1 ]; then
  table=$work/tuned.json
  echo "# tuning: tuccl-tune --profiler tuccl --ranks $ranks --sizes $min:$max -f $factor --budget $tune_budget" >&2
  env "${common[@]}" "$build/tools/tuccl-tune" --profiler tuccl --ranks "$ranks" \
    --collectives allreduce --sizes "$min:$max" -f "$factor" --budget "$tune_budget" -q -o "$table" \
    > "$work/tune.out" 2>&1 || { tail -n 20 "$work/tune.out" >&2; die "tuccl-tune failed"; }
  echo "## the tuned table (tuccl-tune's summary: per entry the time, its interval, and its ratio to the defaults"
  echo "## in the confirmation rounds; a 'default' entry sets nothing)"
  grep -v '^# recommends' "$work/tune.out"
  echo
fi
if [ -n "$table" ]; then
  alternate tuned default
  compare "(a) the table $(basename "$table") against the built-in defaults" tuned default
fi

# ---- (b) the runtime phase, nothing slowed -------------------------------------------------------------
if [ "$adapt" = 1 ]; then
  alternate on off
  compare "(b) the runtime phase, nothing slowed" on off

  # ---- (c) the default group twice as slow --------------------------------------------------------------
  echo "## (c) the default group (0) made twice as slow: TUCCL_TEST_DELAY_GROUP=0:<its time>, in-place time per call"
  printf "%9s %10s %12s %16s %7s  %s\n" size delay "on us" "slowed static us" ratio "settled on (learned table)"
  for size in $slowed; do
    bytes=$(python3 -c "import sys; s=sys.argv[1]; m={'K':1<<10,'M':1<<20,'G':1<<30}; print(int(s[:-1])*m[s[-1]] if s[-1] in m else int(s))" "$size")
    base=$(python3 - "$work" "$pairs" "$bytes" <<'PY'
import sys
work, pairs, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
vals = []
for i in range(pairs):
    for line in open(f"{work}/off.{i}.out"):
        f = line.split()
        if len(f) >= 13 and f[0].isdigit() and int(f[0]) == size:
            vals.append(float(f[-4]))
print(int(sorted(vals)[len(vals) // 2]) if vals else 0)
PY
)
    [ "$base" -gt 0 ] || { echo "# $size: not among the measured sizes; skipped"; continue; }
    delay=(TUCCL_TEST_DELAY_GROUP=0:$base)
    env "${common[@]}" TUCCL_ADAPT=1 TUCCL_ADAPT_FIRST=0 TUCCL_ADAPT_FILE="$work/learned-c.json" "${delay[@]}" \
      "$build/tools/tuccl-run" -n "$ranks" -- "$build/tools/tuccl-bench" allreduce -b "$size" -e "$size" \
      -n "$slowed_iters" -w 20 -c 1 \
      > "$work/slow-on.out" 2> "$work/slow-on.err" || { tail "$work/slow-on.err" >&2; die "the slowed run failed"; }
    # The slowed static choice, measured: the hook acts only with the runtime phase on, so it is
    # on with no agreement ever due (group 0 at every call, nothing probed).
    env "${common[@]}" TUCCL_ADAPT=1 TUCCL_ADAPT_FIRST=1048576 TUCCL_ADAPT_FILE="$work/learned-static.json" \
      "${delay[@]}" "$build/tools/tuccl-run" -n "$ranks" -- \
      "$build/tools/tuccl-bench" allreduce -b "$size" -e "$size" -n "$slowed_iters" -w 20 -c 0 \
      > "$work/slow-off.out" 2> "$work/slow-off.err" || { tail "$work/slow-off.err" >&2; die "the slowed run failed"; }
    python3 - "$work" "$bytes" "$base" "$size" <<'PY'
import json, sys
work, size, base, label = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def t(path):
    for line in open(path):
        f = line.split()
        if len(f) >= 13 and f[0].isdigit() and int(f[0]) == size:
            return float(f[-4]), f[-1]
    return float("nan"), "?"
(on, wrong), (off, _) = t(f"{work}/slow-on.out"), t(f"{work}/slow-off.out")
settled = "?"
try:
    doc = json.load(open(f"{work}/learned-c.json"))
    bucket = size.bit_length() - 1
    for key in doc["keys"]:
        if key["collective"] == "allreduce" and key["bucket"] == bucket:
            us = ", ".join(f"{g['us']:.0f}" for g in key["groups"])
            settled = f"group {key['best']} (agreed us per group: {us})"
except (OSError, ValueError, KeyError):
    pass
check = "" if wrong == "0" else f"; WRONG: {wrong}"
print(f"{label:>9} {base + ' us':>10} {on:>12.1f} {off:>16.1f} {on / off:>7.3f}  {settled}{check}")
PY
  done
fi
