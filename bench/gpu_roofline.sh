#!/usr/bin/env bash
# What TuCCL's collectives reach on ONE NVIDIA GPU, next to that GPU's memory ceilings. One table.
#
#   (a) copy      cudaMemcpy device-to-device of 1 GiB, best of 10, CUDA events (gpu_roofline.cu):
#                 B = bytes read + written / s (a copy of N bytes in t s: B = 2N/t).
#   (b) roofline  a kernel reading n = 2, 4, 8 buffers of 1 GiB and writing their sum (fp32, bf16;
#                 16-byte loads, 8 in flight per thread, the GPU full): GB/s as memory traffic
#                 (n+1)N/t, its share of the copy's traffic B, and one buffer's N/t (in the note).
#   (c) tuccl     tuccl-run -n N -- tuccl-bench COLL (N = 2, 4, 8 rank processes sharing the GPU
#                 under the CUDA MPS daemon this script starts) for AllReduce, AllGather and
#                 ReduceScatter, float and bfloat16, 8M..1G: per row busbw and two fractions (below).
#   (d) nccl      bench/gpu_roofline_nccl.py (torch): prints torch's NCCL version; several ranks on
#                 one GPU need NCCL >= 2.30 (NCCL_MULTI_RANK_GPU_ENABLE=1), so an older one is skipped.
#   (e) latency   tuccl-bench AllReduce 8 B..64 KB on 4 ranks (float), beside the empty-kernel launch
#                 latency (1000 back-to-back launches + one sync, per launch; launch + sync round trip).
#   (f) residency gpu_residency.cu: N processes (each rank count) of floor(SMs/N) blocks of 512 threads,
#                 one per SM, all waiting for each other: whether every block is on the GPU at once,
#                 as TuCCL's kernels (which wait on each other's flags) need.
#   (g) flag hop  gpu_flag_latency.cu: one flag hand-off between two blocks (volatile post and poll),
#                 with no fence, fence.acq_rel.gpu, .sys or fence.sc.sys around it, the flags in device
#                 or in mapped host memory: the floor of every slice hand-off and small-call latency.
#
# busbw is nccl-tests' (PERFORMANCE.md): AllReduce busbw = algbw * 2(n-1)/n, AllGather and
# ReduceScatter busbw = algbw * (n-1)/n, algbw = the row's size / time (AllGather: the total
# received; ReduceScatter: the total sent).
#
# Bounds, for n ranks sharing the one GPU, B from (a):
#   B      the device-to-device copy's memory traffic: bytes read + bytes written per second (a copy
#          of N bytes in t seconds: B = 2N/t), the rate every kernel on the card shares.
#   phys%  busbw / "physical bound": AllReduce B(n-1)/n^2, AllGather and ReduceScatter B/(2n). For
#          AllReduce it is what the 2nS bytes every call must read and write (n inputs in, n outputs
#          out, S each) allow at the traffic rate B; for AllGather and ReduceScatter, the (n-1)S
#          bytes that must cross between ranks, each read and written once.
#   plan%  busbw / the bound of the plan that ran: all ranks share the GPU's traffic rate B (read +
#          write, as a copy moves), so time >= n * bytes_per_rank / B, where bytes_per_rank is the
#          traffic (reads + writes, staging included) of one rank of the ring plan, per row size S:
#            AllReduce      in place (6n-4)S/n fused (recvReduceSend, the default) or 9(n-1)S/n
#                           unfused (--ar-plan unfused); out of place + 2S (the prologue copy)
#            AllGather      in place (3n-2)S/n fused, 4(n-1)S/n unfused; out of place + 2S/n (own
#                           block copied)
#            ReduceScatter  in place (4n-3)S/n fused (its partial sums are stored:
#                           recvReduceCopySend), 5(n-1)S/n unfused; out of place + 2S + 2S/n (input
#                           to the workspace, the block out; backend/call_buffers.h)
#          so plan busbw = B / (bytes_per_rank / (S/n)) * (the busbw factor). Edit plan_units below.
#
# Usage: bench/gpu_roofline.sh [--bin DIR] [--quick] [--ranks "2 4 8"] [--dtypes "float bfloat16"]
#          [--collectives "allreduce allgather reducescatter"] [--sizes 8M:1G] [--factor 2]
#          [--iters 5] [--warmup 1] [--check 0] [--latency-iters 500] [--ar-plan fused|unfused]
#          [--copy-bw GBPS] [--roofline-bytes 1G] [--budget 270] [--no-mps] [--no-nccl]
#          [--channels "1 2 4 8"]
#          [--out FILE] [--keep]
#   --bin DIR   tuccl-run, tuccl-bench and the libraries they load (libtuccl.so; libnvrtc from the
#               CUDA toolkit is found beside nvcc): default build/tools (libtuccl.so is then found in
#               DIR, DIR/../lib or DIR/../backend)
#   --quick     4 ranks, float, 8M..256M, check 1: a first try
#   --check N   tuccl-bench -c (checked calls per size); 0 by default (checking 1G is slow on the host)
#   --budget S  total wall time; runs that no longer fit are listed as SKIPPED (default 270 s)
#   --ar-plan unfused  run libtuccl's plans unfused (TUCCL_FUSE=0) and bound them so; default fused
#   --channels "C ..."  also run the first collective (first rank count, first type) with
#               TUCCL_NCHANNELS=C for each C (rows "tuccl allreduce C=8"); the other rows use the
#               CUDA device's default (plans of 16 channels, each call running as many as its
#               size fills; docs/runtime.md "Channels") unless TUCCL_NCHANNELS is set
#   --out FILE  also write the report there ($OUT/gpu_roofline.txt when OUT is set; the raw logs go
#               to $OUT/gpu_roofline_logs, else FILE.logs, else a /tmp directory named at the end)
# Environment: OUT; NVCC (nvcc to use); PYTHON (python3); TUCCL_* pass through (TUCCL_ADAPT
# defaults to 0, TUCCL_TIMEOUT_S to 30, TUCCL_CACHE_DIR to a fresh directory); TUCCL_DEVICE=cuda.
# Needs an NVIDIA GPU (nvidia-smi), nvcc for (a), (b) and the launch latency, torch for (d).
# Every child runs under `timeout`; a failed measurement is a FAILED row and the script goes on.
set -uo pipefail

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$script_dir/.." && pwd)
prog=gpu_roofline.sh
start_time=$SECONDS

bin=build/tools
quick=0
ranks="2 4 8"
dtypes="float bfloat16"
collectives="allreduce allgather reducescatter"
sizes="8M:1G"
factor=2
iters=5
warmup=1
check=""
latency_ranks=4
latency_sizes="8:64K"
latency_iters=500
ar_plan=fused
channel_sweep=""
label=""
copy_bw=""
roofline_bytes=1G
budget=270
use_mps=1
use_nccl=1
out_file=""
keep=0
user_set=" "

usage() { sed -n '2,/^set -uo pipefail/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
die() { echo "$prog: error: $*" >&2; exit 2; }
need() { [ $# -ge 2 ] || die "option $1 needs a value (see --help)"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) need "$@"; bin=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    --ranks) need "$@"; ranks=$2; user_set+="ranks "; shift 2 ;;
    --dtypes) need "$@"; dtypes=$2; user_set+="dtypes "; shift 2 ;;
    --collectives) need "$@"; collectives=$2; shift 2 ;;
    --sizes) need "$@"; sizes=$2; user_set+="sizes "; shift 2 ;;
    --factor) need "$@"; factor=$2; shift 2 ;;
    --iters) need "$@"; iters=$2; shift 2 ;;
    --warmup) need "$@"; warmup=$2; shift 2 ;;
    --check) need "$@"; check=$2; shift 2 ;;
    --latency-iters) need "$@"; latency_iters=$2; shift 2 ;;
    --ar-plan) need "$@"; ar_plan=$2; shift 2 ;;
    --channels) need "$@"; channel_sweep=$2; shift 2 ;;
    --copy-bw) need "$@"; copy_bw=$2; shift 2 ;;
    --roofline-bytes) need "$@"; roofline_bytes=$2; shift 2 ;;
    --budget) need "$@"; budget=$2; shift 2 ;;
    --no-mps) use_mps=0; shift ;;
    --no-nccl) use_nccl=0; shift ;;
    --out) need "$@"; out_file=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
if [ "$quick" = 1 ]; then
  case "$user_set" in *" ranks "*) ;; *) ranks=4 ;; esac
  case "$user_set" in *" dtypes "*) ;; *) dtypes=float ;; esac
  case "$user_set" in *" sizes "*) ;; *) sizes="8M:256M" ;; esac
  [ -n "$check" ] || check=1
fi
[ -n "$check" ] || check=0
case "$ar_plan" in fused|unfused) ;; *) die "--ar-plan takes fused or unfused, not '$ar_plan'" ;; esac
if [ "$ar_plan" = unfused ]; then export TUCCL_FUSE=0; fi  # the plans that run are the ones bounded
for v in "$factor" "$iters" "$warmup" "$check" "$latency_iters" "$budget"; do
  [[ "$v" =~ ^[0-9]+$ ]] || die "'$v' is not a whole number"
done
[ "$factor" -ge 2 ] || die "--factor must be at least 2"
[[ -z "$copy_bw" || "$copy_bw" =~ ^[0-9]+([.][0-9]+)?$ ]] || die "--copy-bw takes GB/s, not '$copy_bw'"
for n in $ranks; do [[ "$n" =~ ^[0-9]+$ && "$n" -ge 2 ]] || die "--ranks: '$n' is not a rank count >= 2"; done
for d in $dtypes; do case "$d" in float|bfloat16) ;; *) die "--dtypes: float or bfloat16, not '$d'" ;; esac; done
for c in $collectives; do
  case "$c" in allreduce|allgather|reducescatter) ;; *) die "--collectives: allreduce, allgather or reducescatter, not '$c'" ;; esac
done
[[ "$sizes" =~ ^[0-9]+[KMG]?:[0-9]+[KMG]?$ ]] || die "--sizes takes MIN:MAX (8M:1G), not '$sizes'"
size_min=${sizes%%:*}
size_max=${sizes##*:}

# ---- fail fast without a GPU -------------------------------------------------------------------
if ! command -v nvidia-smi > /dev/null 2>&1; then
  echo "$prog: error: nvidia-smi not found: this script measures an NVIDIA GPU and needs its driver;" \
       "run it on the GPU machine (nothing was run)" >&2
  exit 3
fi
if ! smi_csv=$(timeout 20 nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv 2>&1); then
  echo "$prog: error: nvidia-smi failed, no usable GPU: $(printf '%s' "$smi_csv" | head -n 3 | tr '\n' ' ')" >&2
  exit 3
fi
driver=$(timeout 20 nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1)
compute_cap=$(timeout 20 nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1)
compute_mode=$(timeout 20 nvidia-smi --query-gpu=compute_mode --format=csv,noheader 2>/dev/null | head -n 1)
gpu_count=$(printf '%s\n' "$smi_csv" | tail -n +2 | grep -c .)

deadline=$(( start_time + budget ))
reserve=10  # seconds kept for stopping MPS and printing the report

work=$(mktemp -d /tmp/gpu-roofline-XXXXXX) || die "cannot create a temporary directory"
if [ -n "${OUT:-}" ]; then
  logs=$OUT/gpu_roofline_logs
elif [ -n "$out_file" ]; then
  logs=$out_file.logs
else
  logs=$(mktemp -d /tmp/gpu-roofline-logs-XXXXXX)
fi
mkdir -p "$logs" || die "cannot create $logs"
rows=$work/rows.tsv
header=$work/header.txt
: > "$rows"

child=""         # the running child (a `timeout` process), by pid
mps_started=0
printed=0
copy_b=""        # B in GB/s: --copy-bw, else the copy's
python=${PYTHON:-python3}
# torch runs with the caller's library path, not the one TuCCL's binaries get below.
if [ -n "${LD_LIBRARY_PATH+set}" ]; then python_env=(env "LD_LIBRARY_PATH=$LD_LIBRARY_PATH")
else python_env=(env -u LD_LIBRARY_PATH); fi
nccl_ok=0
tuccl_ready=0
timeouts_in_a_row=0

# ---- helpers ---------------------------------------------------------------------------------------
log() { echo "# [$(( SECONDS - start_time ))s] $*" >&2; }

# add_row PART MEASUREMENT N DTYPE SIZE PLACE TIME_US GBPS BOUND PHYS% PLAN PLAN% NOTE
add_row() {
  local IFS=$'\t'
  printf '%s\n' "$*" >> "$rows"
}
# note_row PART MEASUREMENT N DTYPE SIZE NOTE: a row with a note only (FAILED, SKIPPED).
note_row() { add_row "$1" "$2" "$3" "$4" "$5" - - - - - - - "$6"; }

# limit CAP: seconds a child may run: at most CAP and what the budget leaves; 0 when under 8.
limit() {
  local l=$(( deadline - SECONDS - reserve ))
  [ "$l" -gt "$1" ] && l=$1
  [ "$l" -lt 8 ] && l=0
  echo "$l"
}

# run_child NAME SECONDS CMD...: CMD under timeout, stdout to $logs/NAME.out, stderr to NAME.err;
# its exit status (124/137: timed out), 200 when SECONDS is 0 (no time left, nothing run).
run_child() {
  local name=$1 seconds=$2 rc
  shift 2
  printf '%q ' "$@" > "$logs/$name.cmd"
  echo >> "$logs/$name.cmd"
  if [ "$seconds" -le 0 ]; then
    : > "$logs/$name.out"
    echo "not run: the time budget (--budget $budget) is spent" > "$logs/$name.err"
    return 200
  fi
  log "running ($seconds s max): $*"
  timeout -k 5 "$seconds" "$@" > "$logs/$name.out" 2> "$logs/$name.err" &
  child=$!
  wait "$child"
  rc=$?
  child=""
  return "$rc"
}

# reason NAME RC SECONDS: why a child failed, one line: the timeout or exit status and the first
# lines of its stderr (else its stdout's error lines).
reason() {
  local name=$1 rc=$2 seconds=$3 why lines
  case "$rc" in
    200) echo "SKIPPED: time budget (--budget $budget)"; return ;;
    124|137) why="timed out after ${seconds}s" ;;
    *) why="exit $rc" ;;
  esac
  lines=$(grep -v '^[[:space:]]*$' "$logs/$name.err" 2>/dev/null | head -n 3)
  [ -n "$lines" ] || lines=$(grep -i -E 'error|fail|abort|timeout|wrong' "$logs/$name.out" 2>/dev/null | head -n 3)
  lines=$(printf '%s' "$lines" | tr '\t\n' '  ' | cut -c 1-260)
  echo "FAILED ($why): ${lines:-no error output} [logs: $name.*]"
}

# The awk functions every parser shares: hsize(bytes) -> 8, 64K, 8M, 1G; kv(): the key=value
# fields of the line into v[].
# shellcheck disable=SC2016
awk_lib='
  function hsize(x) {
    if (x !~ /^[0-9]+$/) return x
    if (x >= 1073741824 && x % 1073741824 == 0) return x / 1073741824 "G"
    if (x >= 1048576 && x % 1048576 == 0) return x / 1048576 "M"
    if (x >= 1024 && x % 1024 == 0) return x / 1024 "K"
    return x
  }
  function kv(   i, p) {
    split("", v)
    for (i = 2; i <= NF; i++) { p = index($i, "="); if (p > 0) v[substr($i, 1, p - 1)] = substr($i, p + 1) }
  }'
hsize() { awk -v x="$1" "$awk_lib"' BEGIN { print hsize(x) }'; }

# mps_pids: the MPS control daemons that serve this script's pipe directory (started by it).
mps_pids() {
  local p
  for p in /proc/[0-9]*; do
    [ "$(cat "$p/comm" 2>/dev/null)" = nvidia-cuda-mps ] || continue
    { tr '\0' '\n' < "$p/environ"; } 2>/dev/null | grep -qx "CUDA_MPS_PIPE_DIRECTORY=$work/mps" && echo "${p#/proc/}"
  done
}

stop_mps() {
  [ "$mps_started" = 1 ] || return 0
  mps_started=0
  log "stopping the MPS daemon"
  echo quit | timeout 15 nvidia-cuda-mps-control > /dev/null 2>&1
  local i pids
  for i in 1 2 3 4 5 6 7 8 9 10; do
    pids=$(mps_pids)
    [ -n "$pids" ] || break
    sleep 0.5
  done
  for i in $pids; do
    log "MPS control daemon $i still running after quit: SIGTERM"
    kill -TERM "$i" 2>/dev/null
  done
  cp -r "$work/mpslog" "$logs/mpslog" 2>/dev/null
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
}

# report: the header, the legend and the table, to stdout, $OUT/gpu_roofline.txt and --out.
report() {
  [ "$printed" = 0 ] || return 0
  printed=1
  stop_mps
  local text=$work/report.txt
  {
    cat "$header"
    if [ -n "$copy_b" ]; then
      echo "# B = $copy_b GB/s: device-to-device copy traffic, bytes read + written per second (2N/t)"
    else
      echo "# B unknown (no copy result and no --copy-bw): no bounds"
    fi
    echo "# GB/s: copy B; roofline the memory traffic (n+1)N/t; tuccl/nccl busbw (nccl-tests: AllReduce"
    echo "#   algbw*2(n-1)/n, AllGather/ReduceScatter algbw*(n-1)/n). time: us per call (copy, roofline: best)."
    echo "# bound (GB/s): roofline B, the copy's traffic; tuccl/nccl the physical busbw bound, AllReduce"
    echo "#   B(n-1)/n^2, AllGather/ReduceScatter B/(2n)."
    echo "# plan (GB/s): busbw bound of the ring plan ($ar_plan): all ranks share the traffic rate B,"
    echo "#   time >= n*bytes_per_rank/B; bytes_per_rank (reads + writes, staging included, S the size):"
    echo "#   fused AllReduce (6n-4)S/n, AllGather (3n-2)S/n, ReduceScatter (4n-3)S/n; unfused 9(n-1)S/n,"
    echo "#   4(n-1)S/n, 5(n-1)S/n;"
    echo "#   out of place + 2S (AllReduce), + 2S/n (AllGather), + 2S + 2S/n (ReduceScatter)."
    echo "# place: oop out of place, ip in place. wall time $(( SECONDS - start_time )) s; logs in $logs"
    echo "#"
    awk -F '\t' '
      BEGIN { nc = split("part|measurement|n|dtype|size|place|time (us)|GB/s|bound|phys%|plan|plan%|note", h, "|")
              for (i = 1; i <= nc; i++) { cell[0, i] = h[i]; w[i] = length(h[i]) } }
      { nr++
        for (i = 1; i <= nc; i++) {
          c = (i <= NF && $i != "") ? $i : "-"
          cell[nr, i] = c
          if (i < nc && length(c) > w[i]) w[i] = length(c)
        } }
      function line(r,   i, s, f) {
        s = "|"
        for (i = 1; i < nc; i++) {
          f = (r > 0 && (i == 3 || i >= 7)) ? " %" w[i] "s |" : " %-" w[i] "s |"
          s = s sprintf(f, cell[r, i])
        }
        return s " " cell[r, nc]
      }
      END {
        print line(0)
        s = "|"
        for (i = 1; i < nc; i++) { d = ""; for (j = 0; j < w[i] + 2; j++) d = d "-"; s = s d "|" }
        print s " ---"
        for (r = 1; r <= nr; r++) print line(r)
      }' "$rows"
  } > "$text"
  cat "$text"
  if [ -n "${OUT:-}" ]; then cp "$text" "$OUT/gpu_roofline.txt" && log "report written to $OUT/gpu_roofline.txt"; fi
  if [ -n "$out_file" ]; then cp "$text" "$out_file" && log "report written to $out_file"; fi
}

cleanup() {
  if [ -n "$child" ]; then
    kill -TERM "$child" 2>/dev/null
    wait "$child" 2>/dev/null
    child=""
  fi
  rm -f /dev/shm/tuccl-residency-$$-*
  stop_mps
  if [ "$keep" = 1 ]; then log "kept $work"; else rm -rf "$work"; fi
}
on_signal() {
  trap '' INT TERM HUP
  log "interrupted"
  if [ -n "$child" ]; then kill -TERM "$child" 2>/dev/null; wait "$child" 2>/dev/null; child=""; fi
  note_row note interrupted - - - "interrupted by a signal: the later measurements did not run"
  report
  exit 130
}
trap cleanup EXIT
trap on_signal INT TERM HUP

# ---- header ----------------------------------------------------------------------------------------
{
  echo "# gpu_roofline.sh on ${HOSTNAME:-$(uname -n)} at $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(nproc) cores"
  printf '%s\n' "$smi_csv" | sed 's/^/# /'
  echo "# driver $driver, compute capability $compute_cap, compute mode $compute_mode, $gpu_count GPU(s) visible"
} > "$header"
cat "$header" >&2

# ---- (a), (b), (e): gpu_roofline.cu ----------------------------------------------------------------
nvcc=${NVCC:-}
if [ -z "$nvcc" ]; then
  nvcc=$(command -v nvcc 2>/dev/null || true)
  if [ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ]; then nvcc=/usr/local/cuda/bin/nvcc; fi
fi
arch=sm_90
if [[ "$compute_cap" =~ ^[0-9]+\.[0-9]+$ ]]; then arch=sm_${compute_cap/./}; fi
roofline=""
if [ -z "$nvcc" ] || [ ! -x "$nvcc" ]; then
  note_row copy nvcc - - - "FAILED: nvcc not found (PATH, /usr/local/cuda/bin or NVCC=...): no copy, roofline or launch numbers"
  nvcc=""
else
  echo "# $("$nvcc" --version 2>/dev/null | grep -m 1 release) ($nvcc -O3 -arch=$arch)" >> "$header"
  t=$(limit 180)
  run_child nvcc "$t" "$nvcc" -O3 -arch="$arch" -o "$work/gpu_roofline" "$script_dir/gpu_roofline.cu"
  rc=$?
  if [ "$rc" = 0 ]; then roofline=$work/gpu_roofline
  else note_row copy "nvcc gpu_roofline.cu" - - - "$(reason nvcc "$rc" "$t")"; fi
fi

# launch_rows NAME LABEL: the rows of one `gpu_roofline launch` run.
launch_rows() {
  awk -v label="$2" "$awk_lib"' $1 == "launch" {
      kv()
      printf "latency\tempty kernel, back to back%s\t-\t-\t-\t-\t%s\t-\t-\t-\t-\t-\t%s launches then one sync: per launch\n", label, v["back_to_back_us"], v["reps"]
      printf "latency\tempty kernel, launch+sync%s\t-\t-\t-\t-\t%s\t-\t-\t-\t-\t-\tround trip, mean of %s (best %s us)\n", label, v["roundtrip_us"], v["reps"], v["roundtrip_min_us"] }' \
    "$logs/$1.out" >> "$rows"
}

if [ -n "$roofline" ]; then
  t=$(limit 30)
  run_child info "$t" "$roofline" info && sed -n 's/^info /# gpu_roofline info: /p' "$logs/info.out" >> "$header"

  t=$(limit 60)
  run_child copy "$t" "$roofline" copy --bytes "$roofline_bytes" --reps 10
  rc=$?
  awk "$awk_lib"' $1 == "copy" {
      kv()
      printf "copy\tcudaMemcpy D2D (B = 2N/t)\t-\t-\t%s\t-\t%.1f\t%s\t-\t-\t-\t-\tbest of %s; bytes copied N/t = %s GB/s; median %.1f us\n",
             hsize(v["bytes"]), v["best_ms"] * 1000, v["rw_GBps"], v["reps"], v["B_GBps"], v["median_ms"] * 1000 }' \
    "$logs/copy.out" >> "$rows"
  measured_b=$(awk "$awk_lib"' $1 == "copy" { kv(); print v["rw_GBps"] }' "$logs/copy.out" | head -n 1)
  if [ "$rc" != 0 ]; then note_row copy "cudaMemcpy D2D" - - "$roofline_bytes" "$(reason copy "$rc" "$t")"
  elif [ -z "$measured_b" ]; then note_row copy "cudaMemcpy D2D" - - "$roofline_bytes" "FAILED: no result line [logs: copy.*]"; fi
  copy_b=${copy_bw:-$measured_b}

  t=$(limit 90)
  run_child reduce "$t" "$roofline" reduce --bytes "$roofline_bytes" --reps 10 --inputs "2 4 8" --dtype all
  rc=$?
  awk -v b="$copy_b" "$awk_lib"' $1 == "reduce" {
      kv()
      bound = b != "" ? sprintf("%.1f", b) : "-"
      pct = b != "" ? sprintf("%.1f%%", 100 * v["traffic_GBps"] / b) : "-"
      printf "roofline\tsum of n buffers ((n+1)N/t)\t%s\t%s\t%s\t-\t%.1f\t%s\t%s\t%s\t-\t-\tone buffer N/t = %s GB/s; %s blocks; check %s\n",
             v["n"], v["dtype"], hsize(v["bytes"]), v["best_ms"] * 1000, v["traffic_GBps"], bound, pct,
             v["buffer_GBps"], v["blocks"], v["check"] }' "$logs/reduce.out" >> "$rows"
  [ "$rc" = 0 ] || note_row roofline "sum of n buffers" - - "$roofline_bytes" "$(reason reduce "$rc" "$t")"

  t=$(limit 30)
  run_child launch "$t" "$roofline" launch --reps 1000
  rc=$?
  launch_rows launch ""
  [ "$rc" = 0 ] || note_row latency "empty kernel launch" - - - "$(reason launch "$rc" "$t")"
fi

# (g) one flag hop between two blocks (gpu_flag_latency.cu), per fence and flag memory: the floor of
# every slice hand-off and of small calls' latency.
if [ -n "$nvcc" ]; then
  t=$(limit 120)
  run_child nvcc-flag "$t" "$nvcc" -O3 -arch="$arch" -o "$work/gpu_flag_latency" "$script_dir/gpu_flag_latency.cu"
  rc=$?
  if [ "$rc" = 0 ]; then
    t=$(limit 60)
    run_child flag "$t" "$work/gpu_flag_latency" 10000
    rc=$?
    awk "$awk_lib"' $1 == "flag" {
        kv()
        printf "latency\tflag hop, %s memory, fence %s\t-\t-\t-\t-\t%.2f\t-\t-\t-\t-\t-\tone way, mean of %s round trips\n",
               v["memory"], v["fence"], v["hop_ns"] / 1000, v["rounds"] }' "$logs/flag.out" >> "$rows"
    [ "$rc" = 0 ] || note_row latency "flag hop" - - - "$(reason flag "$rc" "$t")"
  else
    note_row latency "nvcc gpu_flag_latency.cu" - - - "$(reason nvcc-flag "$rc" "$t")"
  fi
fi
copy_b=${copy_b:-$copy_bw}

# ---- (d), the version first: cheap, and in the report even when the time runs out later -----------
if [ "$use_nccl" = 1 ]; then
  if ! command -v "$python" > /dev/null 2>&1; then
    note_row nccl "torch NCCL" - - - "FAILED: $python not found (PYTHON=...)"
  else
    t=$(limit 90)
    run_child nccl-version "$t" "${python_env[@]}" "$python" "$script_dir/gpu_roofline_nccl.py" --version-only
    rc=$?
    version_line=$(sed -n 's/^nccl-version //p' "$logs/nccl-version.out" | head -n 1)
    skip=$(sed -n 's/^nccl-skip //p' "$logs/nccl-version.out" | head -n 1)
    [ -z "$version_line" ] || echo "# NCCL (torch): $version_line" >> "$header"
    if [ "$rc" != 0 ]; then note_row nccl "torch NCCL version" - - - "$(reason nccl-version "$rc" "$t")"
    elif [ -n "$skip" ]; then note_row nccl "torch NCCL ${version_line%% *}" - - - "SKIPPED: $skip"
    elif grep -q '^nccl-ok' "$logs/nccl-version.out"; then nccl_ok=1
    else note_row nccl "torch NCCL version" - - - "FAILED: no answer [logs: nccl-version.*]"; fi
  fi
fi

# ---- MPS: this script's own daemon, its pipes in the work directory --------------------------------
if [ "$use_mps" = 1 ]; then
  if ! command -v nvidia-cuda-mps-control > /dev/null 2>&1; then
    note_row mps nvidia-cuda-mps-control - - - "FAILED: not found: the ranks run without MPS (their kernels take turns)"
  else
    mkdir -p "$work/mps" "$work/mpslog"
    export CUDA_MPS_PIPE_DIRECTORY=$work/mps CUDA_MPS_LOG_DIRECTORY=$work/mpslog
    if timeout 20 nvidia-cuda-mps-control -d > "$logs/mps-start.out" 2>&1; then
      mps_started=1
      sleep 1
      log "MPS control daemon started (pid $(mps_pids | tr '\n' ' ')), pipes in $work/mps"
      if [ -n "$roofline" ]; then  # a first client: proves MPS works, and the launch latency under it
        t=$(limit 40)
        run_child launch-mps "$t" "$roofline" launch --reps 1000
        rc=$?
        if [ "$rc" = 0 ]; then
          launch_rows launch-mps " (MPS)"
        else
          note_row mps "MPS client" - - - "$(reason launch-mps "$rc" "$t"); MPS stopped: the ranks run without it"
          stop_mps
        fi
      fi
    else
      note_row mps "nvidia-cuda-mps-control -d" - - - "FAILED: $(head -n 2 "$logs/mps-start.out" | tr '\n' ' ')- the ranks run without MPS"
      unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    fi
  fi
fi
# ---- (f) residency: are n processes' blocks all on the GPU at once (TuCCL's kernels need it) ----------
# gpu_residency.cu: each of n processes launches floor(SMs / n) blocks of 512 threads, one per SM,
# that wait for every block of every process (8 s at most).
sms=$(sed -n 's/.* sms=\([0-9]*\).*/\1/p' "$logs/info.out" 2>/dev/null | head -n 1)
if [ -n "$nvcc" ] && [ -n "$sms" ]; then
  t=$(limit 120)
  run_child nvcc-residency "$t" "$nvcc" -O3 -arch="$arch" -o "$work/gpu_residency" "$script_dir/gpu_residency.cu"
  rc=$?
  if [ "$rc" = 0 ]; then
    for n in $ranks; do
      k=$(( sms / n ))
      [ "$k" -ge 1 ] || continue
      shm_counter=/dev/shm/tuccl-residency-$$-$n  # tmpfs: cudaHostRegister maps it (not every file system's pages)
      t=$(limit 30)
      [ "$t" -gt 0 ] || { note_row residency "$n processes x $k blocks" "$n" - - "SKIPPED: time budget (--budget $budget)"; continue; }
      rm -f "$shm_counter"
      log "residency: $n processes x $k blocks"
      printf '%s %s %s %s\n' "$work/gpu_residency" "$k" "$(( n * k ))" "$shm_counter" > "$logs/residency-$n.cmd"
      pids=()
      for _ in $(seq "$n"); do
        timeout -k 5 "$t" "$work/gpu_residency" "$k" "$(( n * k ))" "$shm_counter" >> "$logs/residency-$n.out" 2>> "$logs/residency-$n.err" &
        pids+=($!)
      done
      for p in "${pids[@]}"; do wait "$p"; done
      rm -f "$shm_counter"
      yes=$(grep -c 'resident=yes' "$logs/residency-$n.out")
      most=$(awk '/^residency/ { for (i = 2; i <= NF; i++) if ($i ~ /^seen=/) { v = substr($i, 6) + 0; if (v > m) m = v } } END { print m + 0 }' "$logs/residency-$n.out")
      if [ "$yes" = "$n" ]; then
        note_row residency "$n processes x $k blocks (512 threads)" "$n" - - "all $(( n * k )) blocks resident at once"
      else
        note_row residency "$n processes x $k blocks (512 threads)" "$n" - - "NOT all resident: at most $most of $(( n * k )) seen at once ($yes of $n processes saw all) [logs: residency-$n.*]"
      fi
    done
  else
    note_row residency "nvcc gpu_residency.cu" - - - "$(reason nvcc-residency "$rc" "$t")"
  fi
fi

if [ "$mps_started" = 1 ]; then echo "# MPS: on (this script's daemon)" >> "$header"
else echo "# MPS: off" >> "$header"; fi

# ---- (c), (e): TuCCL ---------------------------------------------------------------------------------
if [ ! -d "$bin" ] && [ -d "$repo/$bin" ]; then bin=$repo/$bin; fi
if [ -d "$bin" ]; then bin=$(cd "$bin" && pwd); fi
tuccl_run=$bin/tuccl-run
tuccl_bench=$bin/tuccl-bench
libpath=$bin
for d in "$bin/../lib" "$bin/../lib64" "$bin/../backend"; do
  if [ -d "$d" ]; then libpath+=:$(cd "$d" && pwd); fi
done
if [ -n "$nvcc" ]; then
  for d in "$(dirname "$nvcc")/../lib64" "$(dirname "$nvcc")/../targets/x86_64-linux/lib"; do
    if [ -d "$d" ]; then libpath+=:$(cd "$d" && pwd); fi
  done
fi
if [ -d /usr/local/cuda/lib64 ]; then libpath+=:/usr/local/cuda/lib64; fi
export LD_LIBRARY_PATH=$libpath${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export TUCCL_DEVICE=cuda
export TUCCL_ADAPT=${TUCCL_ADAPT:-0}
export TUCCL_TIMEOUT_S=${TUCCL_TIMEOUT_S:-30}
export TUCCL_CACHE_DIR=${TUCCL_CACHE_DIR:-$work/tuccl-cache}
{
  printf '# TuCCL: %s; TUCCL_DEVICE=cuda TUCCL_ADAPT=%s TUCCL_TIMEOUT_S=%s' "$bin" "$TUCCL_ADAPT" "$TUCCL_TIMEOUT_S"
  env | grep -E '^TUCCL_(ALGO|NCHANNELS|CHUNK_SIZE|PROTO|STAGING_BYTES|TUNER_TABLE|FUSE)=' | sed 's/^/ /' | tr -d '\n'
  printf '; tuccl-bench -n %s -w %s -c %s -f %s -o sum\n' "$iters" "$warmup" "$check" "$factor"
} >> "$header"

if [ ! -x "$tuccl_run" ] || [ ! -x "$tuccl_bench" ]; then
  note_row tuccl "tuccl-run, tuccl-bench" - - - "FAILED: not found in $bin (--bin DIR)"
else
  missing=$( { timeout 30 ldd "$tuccl_bench"; timeout 30 ldd "$tuccl_run"; } 2>&1 | awk '/not found/ { printf "%s ", $1 }')
  if [ -n "$missing" ]; then
    note_row tuccl "tuccl-bench libraries" - - - "FAILED: missing libraries: $missing(LD_LIBRARY_PATH=$LD_LIBRARY_PATH)"
  else
    tuccl_ready=1
  fi
fi

# bench_rows PART NAME COLL N B: a row per size and half (out of place, in place) of a tuccl-bench
# output (nccl-tests' columns), with busbw, the physical and the plan bound and the fractions.
bench_rows() {
  awk -v part="$1" -v coll="$3" -v n="$4" -v b="$5" -v arplan="$ar_plan" -v label="$label" "$awk_lib"'
    # busbw = algbw * factor (nccl-tests): AllReduce 2(n-1)/n, AllGather and ReduceScatter (n-1)/n.
    function factor() { return coll == "allreduce" ? 2 * (n - 1) / n : (n - 1) / n }
    # The physical bound of busbw: AllReduce B(n-1)/n^2, AllGather and ReduceScatter B/(2n).
    function phys() { return coll == "allreduce" ? b * (n - 1) / (n * n) : b / (2 * n) }
    # plan_units: the traffic (reads + writes) of one rank of the ring plan in units of S/n, S the
    # row size. The plan bound: time >= n * units * S/n / B, so plan busbw = B / units * factor.
    function plan_units(place) {
      if (coll == "allreduce")
        return (arplan == "unfused" ? 9 * (n - 1) : 6 * n - 4) + (place == "oop" ? 2 * n : 0)
      if (coll == "allgather") return (arplan == "unfused" ? 4 * (n - 1) : 3 * n - 2) + (place == "oop" ? 2 : 0)
      return (arplan == "unfused" ? 5 * (n - 1) : 4 * n - 3) + (place == "oop" ? 2 * n + 2 : 0)
    }
    function emit(place, t, alg, bus, wrong,   note, gb, bound, pb) {
      gb = bus < 10 ? sprintf("%.2f", bus) : sprintf("%.1f", bus)
      note = "algbw " alg " GB/s"
      if (wrong == "0") note = note "; checked: 0 wrong"
      else if (wrong != "N/A") note = note "; WRONG: " wrong " elements"
      if (part == "latency" || b == "") {
        printf "%s\ttuccl %s%s\t%d\t%s\t%s\t%s\t%s\t%s\t-\t-\t-\t-\t%s\n", part, coll, label, n, $3, hsize($1), place, t, gb, note
        return
      }
      bound = phys(); pb = b / plan_units(place) * factor()
      printf "%s\ttuccl %s%s\t%d\t%s\t%s\t%s\t%s\t%s\t%.1f\t%.1f%%\t%.1f\t%.1f%%\t%s\n", part, coll, label, n, $3, hsize($1),
             place, t, gb, bound, 100 * bus / bound, pb, 100 * bus / pb, note
    }
    !/^#/ && NF >= 13 && $1 ~ /^[0-9]+$/ {
      emit("oop", $(NF-7), $(NF-6), $(NF-5), $(NF-4))
      emit("ip", $(NF-3), $(NF-2), $(NF-1), $NF)
    }' "$logs/$2.out"
}

# run_tuccl PART NAME N COLL DTYPE MIN MAX ITERS WARMUP CHECK CAP: one tuccl-run of tuccl-bench.
run_tuccl() {
  local part=$1 name=$2 n=$3 coll=$4 dtype=$5 min=$6 max=$7 it=$8 wu=$9 ck=${10} cap=${11} t rc range
  range="$(hsize "$min")..$(hsize "$max")"
  [ "$tuccl_ready" = 1 ] || return 0
  t=$(limit "$cap")
  if [ "$t" = 0 ]; then
    note_row "$part" "tuccl $coll$label" "$n" "$dtype" "$range" "SKIPPED: time budget (--budget $budget)"
    return 0
  fi
  if [ "$part" = tuccl ] && [ "$timeouts_in_a_row" -ge 2 ]; then
    note_row "$part" "tuccl $coll$label" "$n" "$dtype" "$range" "SKIPPED: the two runs before it timed out"
    return 0
  fi
  run_child "$name" "$t" "$tuccl_run" -n "$n" --timeout "$(( t - 6 ))" -- "$tuccl_bench" "$coll" \
    -b "$min" -e "$max" -f "$factor" -n "$it" -w "$wu" -c "$ck" -d "$dtype" -o sum
  rc=$?
  bench_rows "$part" "$name" "$coll" "$n" "$([ "$part" = tuccl ] && echo "$copy_b")" >> "$rows"
  if [ "$rc" != 0 ]; then
    note_row "$part" "tuccl $coll$label" "$n" "$dtype" "$range" "$(reason "$name" "$rc" "$t")"
  elif ! grep -q -E '^ *[0-9]+ ' "$logs/$name.out"; then
    note_row "$part" "tuccl $coll$label" "$n" "$dtype" "$range" "FAILED: no result rows [logs: $name.*]"
  fi
  case "$rc" in 124|137) timeouts_in_a_row=$(( timeouts_in_a_row + 1 )) ;; *) timeouts_in_a_row=0 ;; esac
}

# nccl_rows NAME: the rows of a gpu_roofline_nccl.py output, with the physical bound.
nccl_rows() {
  awk -v b="$copy_b" "$awk_lib"'
    $1 == "nccl" {
      kv()
      n = v["n"]; bus = v["busbw"]
      bound = b == "" ? "" : (v["coll"] == "allreduce" ? b * (n - 1) / (n * n) : b / (2 * n))
      printf "nccl\tnccl %s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t-\t-\talgbw %s GB/s\n", v["coll"], n, v["dtype"],
             hsize(v["size"]), v["place"], v["time_us"], bus, bound == "" ? "-" : sprintf("%.1f", bound),
             bound == "" ? "-" : sprintf("%.1f%%", 100 * bus / bound), v["algbw"]
    }
    $1 == "nccl-failed" { $1 = ""; printf "nccl\tnccl\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\tFAILED:%s\n", $0 }' "$logs/$1.out"
}

run_nccl() {
  [ "$nccl_ok" = 1 ] || return 0
  local t rc
  t=$(limit 200)
  run_child nccl "$t" "${python_env[@]}" "$python" "$script_dir/gpu_roofline_nccl.py" --ranks "$ranks" --sizes "$sizes" \
    --factor "$factor" --dtypes "$dtypes" --collectives "$collectives" --iters "$iters" --warmup 2 \
    --timeout "$(( t > 8 ? t - 8 : 1 ))"
  rc=$?
  nccl_rows nccl >> "$rows"
  if [ "$rc" != 0 ] && ! grep -q '^nccl-failed' "$logs/nccl.out"; then
    note_row nccl "torch NCCL" - - - "$(reason nccl "$rc" "$t")"
  fi
}

# --channels: the first collective on the first rank count in the first type, once per channel
# count (TUCCL_NCHANNELS), to show how the data path scales with its TBs.
run_sweep() {
  local first_n=${ranks%% *} first_coll=${collectives%% *} first_dtype=${dtypes%% *} c
  for c in $channel_sweep; do
    label=" C=$c"
    export TUCCL_NCHANNELS=$c
    run_tuccl tuccl "$first_coll-n$first_n-$first_dtype-c$c" "$first_n" "$first_coll" "$first_dtype" \
      "$size_min" "$size_max" "$iters" "$warmup" "$check" 120
  done
  unset TUCCL_NCHANNELS
  label=""
}

# (e) first (short), then (c): every collective and rank count in the first type, NCCL, then the
# other types, so what matters most runs before the budget can run out.
run_tuccl latency "latency-n$latency_ranks" "$latency_ranks" allreduce float "${latency_sizes%%:*}" \
  "${latency_sizes##*:}" "$latency_iters" 20 1 60
first=1
for dtype in $dtypes; do
  for coll in $collectives; do
    for n in $ranks; do
      run_tuccl tuccl "$coll-n$n-$dtype" "$n" "$coll" "$dtype" "$size_min" "$size_max" "$iters" "$warmup" "$check" 120
    done
  done
  if [ "$first" = 1 ]; then run_sweep; run_nccl; first=0; fi
done
if [ "$first" = 1 ]; then run_sweep; run_nccl; fi

report
