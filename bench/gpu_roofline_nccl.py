#!/usr/bin/env python3
"""NCCL's side of bench/gpu_roofline.sh: n ranks as processes, all on cuda:0, through torch.

NCCL runs several ranks on one GPU only from 2.30 on, with NCCL_MULTI_RANK_GPU_ENABLE=1. This
prints the NCCL that torch carries; when it is older it says so and measures nothing (exit 0).
Otherwise, per rank count n, it spawns n processes (all on cuda:0, process group "nccl" through a
file rendezvous) and times all_reduce, all_gather_into_tensor and reduce_scatter_tensor with CUDA
events, nccl-tests style: per size `iters` calls back to back after `warmup` calls and a barrier,
the time per call averaged over the ranks. Sizes are nccl-tests' row sizes: AllReduce the buffer,
AllGather the total received, ReduceScatter the total sent. busbw is nccl-tests' (PERFORMANCE.md):
AllReduce algbw * 2(n-1)/n, AllGather and ReduceScatter algbw * (n-1)/n.

torch's all_reduce works in place only, so AllReduce has no out-of-place row. In place for
AllGather means the input is the output's block `rank`, for ReduceScatter the output is the
input's block `rank` (NCCL's definitions).

Output, one line each, parsed by gpu_roofline.sh:
  nccl-version V torch=T
  nccl-skip REASON
  nccl coll=C n=N dtype=D size=BYTES place=oop|ip time_us=T algbw=A busbw=B
  nccl-failed n=N REASON
"""
import argparse
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback

NEEDED = (2, 30, 0)
COLLECTIVES = ("allreduce", "allgather", "reducescatter")


def parse_size(text):
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip()
    if text and text[-1].upper() in scale:
        return int(float(text[:-1]) * scale[text[-1].upper()])
    return int(text)


def sizes_of(spec, factor):
    low, _, high = spec.partition(":")
    low = parse_size(low)
    high = parse_size(high or low)
    out = []
    size = low
    while size <= high:
        out.append(size)
        size *= factor
    return out


def version_tuple(version):
    """torch.cuda.nccl.version(): a tuple (2, 28, 9) in recent torch, an int in old ones."""
    if isinstance(version, (tuple, list)):
        parts = [int(v) for v in version[:3] if str(v).isdigit()]
        return tuple(parts + [0] * (3 - len(parts)))
    version = int(version)
    if version >= 10000:  # NCCL_VERSION_CODE from 2.9: major*10000 + minor*100 + patch
        return (version // 10000, version // 100 % 100, version % 100)
    return (version // 1000, version // 100 % 10, version % 100)


def bus_factor(coll, n):
    return 2.0 * (n - 1) / n if coll == "allreduce" else (n - 1) / n


def worker(rank, n, opts, init_file):
    """One rank: measure every (collective, dtype, size, place); rank 0 prints the rows."""
    try:
        import torch
        import torch.distributed as dist

        torch.cuda.set_device(0)
        device = torch.device("cuda", 0)
        dist.init_process_group("nccl", init_method="file://" + init_file, rank=rank, world_size=n,
                                device_id=device)
        dtypes = {"float": torch.float32, "bfloat16": torch.bfloat16}
        sync = torch.zeros(1, device=device)
        for coll in opts.collectives.split():
            for dname in opts.dtypes.split():
                dtype = dtypes[dname]
                elem = torch.tensor([], dtype=dtype).element_size()
                for size in sizes_of(opts.sizes, opts.factor):
                    count = size // elem // n * n  # elements of the row's buffer
                    if count == 0:
                        continue
                    block = count // n
                    places = ["ip"] if coll == "allreduce" else ["oop", "ip"]
                    for place in places:
                        if coll == "allreduce":
                            buf = torch.ones(count, dtype=dtype, device=device)

                            def call():
                                dist.all_reduce(buf)
                        elif coll == "allgather":
                            out = torch.empty(count, dtype=dtype, device=device)
                            inp = (out.narrow(0, rank * block, block) if place == "ip"
                                   else torch.ones(block, dtype=dtype, device=device))

                            def call():
                                dist.all_gather_into_tensor(out, inp)
                        else:
                            inp = torch.ones(count, dtype=dtype, device=device)
                            out = (inp.narrow(0, rank * block, block) if place == "ip"
                                   else torch.empty(block, dtype=dtype, device=device))

                            def call():
                                dist.reduce_scatter_tensor(out, inp)
                        for _ in range(opts.warmup):
                            call()
                        dist.all_reduce(sync)
                        torch.cuda.synchronize()
                        start = torch.cuda.Event(enable_timing=True)
                        stop = torch.cuda.Event(enable_timing=True)
                        start.record()
                        for _ in range(opts.iters):
                            call()
                        stop.record()
                        stop.synchronize()
                        us = torch.tensor([start.elapsed_time(stop) * 1000.0 / opts.iters], device=device)
                        dist.all_reduce(us)
                        us = us.item() / n
                        row_bytes = count * elem
                        algbw = row_bytes / (us * 1e-6) / 1e9
                        if rank == 0:
                            print("nccl coll=%s n=%d dtype=%s size=%d place=%s time_us=%.2f algbw=%.2f busbw=%.2f"
                                  % (coll, n, dname, row_bytes, place, us, algbw, algbw * bus_factor(coll, n)),
                                  flush=True)
                        del call
                        torch.cuda.empty_cache()
        dist.destroy_process_group()
    except BaseException as e:  # noqa: BLE001 - report anything, then fail the rank
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        print("nccl-failed n=%d rank %d: %s: %s" % (n, rank, type(e).__name__, first[:200]), flush=True)
        traceback.print_exc(file=sys.stderr)
        sys.stderr.flush()
        os._exit(1)


def run_ranks(n, opts, deadline):
    """Runs n ranks; False when one failed or the time ran out (the others are stopped)."""
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    store_dir = tempfile.mkdtemp(prefix="gpu-roofline-nccl-")
    init_file = os.path.join(store_dir, "store")
    procs = [ctx.Process(target=worker, args=(r, n, opts, init_file)) for r in range(n)]
    try:
        for p in procs:
            p.start()
        while any(p.is_alive() for p in procs):
            if time.monotonic() > deadline:
                print("nccl-failed n=%d timed out (--timeout)" % n, flush=True)
                return False
            if any(p.exitcode not in (None, 0) for p in procs):
                bad = [p for p in procs if p.exitcode not in (None, 0)][0]
                print("nccl-failed n=%d rank %d exited with %s" % (n, procs.index(bad), bad.exitcode), flush=True)
                return False
            time.sleep(0.2)
        bad = [p for p in procs if p.exitcode != 0]
        if bad:
            print("nccl-failed n=%d rank %d exited with %s" % (n, procs.index(bad[0]), bad[0].exitcode), flush=True)
            return False
        return True
    finally:
        for p in procs:  # only our own children, by their pid
            if p.is_alive():
                p.terminate()
        for p in procs:
            p.join(5)
            if p.is_alive():
                p.kill()
                p.join(5)
        shutil.rmtree(store_dir, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", default="2 4 8")
    parser.add_argument("--sizes", default="8M:1G", help="MIN:MAX, K/M/G suffixes (powers of 1024)")
    parser.add_argument("--factor", type=int, default=2)
    parser.add_argument("--dtypes", default="float bfloat16")
    parser.add_argument("--collectives", default=" ".join(COLLECTIVES))
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=120, help="seconds for everything")
    parser.add_argument("--version-only", action="store_true", help="print the version and whether it is usable")
    parser.add_argument("--force", action="store_true", help="run even when NCCL is older than 2.30")
    opts = parser.parse_args()
    deadline = time.monotonic() + opts.timeout
    for coll in opts.collectives.split():
        if coll not in COLLECTIVES:
            parser.error("unknown collective %r" % coll)
    if opts.factor < 2:
        parser.error("--factor must be at least 2")

    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)  # run_ranks' finally stops the ranks

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)

    import torch

    version = version_tuple(torch.cuda.nccl.version())
    text = ".".join(str(v) for v in version)
    print("nccl-version %s torch=%s" % (text, torch.__version__), flush=True)
    if version < NEEDED and not opts.force:
        print("nccl-skip NCCL %s < 2.30: several ranks on one GPU (NCCL_MULTI_RANK_GPU_ENABLE=1) needs NCCL >= 2.30"
              % text, flush=True)
        return 0
    if opts.version_only:
        print("nccl-ok", flush=True)
        return 0
    if not torch.cuda.is_available():
        print("nccl-skip torch sees no GPU", flush=True)
        return 0
    os.environ["NCCL_MULTI_RANK_GPU_ENABLE"] = "1"
    ok = True
    for n in [int(r) for r in opts.ranks.split()]:
        if time.monotonic() > deadline:
            print("nccl-failed n=%d not run: --timeout spent" % n, flush=True)
            ok = False
            continue
        ok = run_ranks(n, opts, deadline) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
