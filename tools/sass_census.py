#!/usr/bin/env python3
"""SASS census of compiled TuCCL kernels (docs/kernels.md, "SASS census").

Reads CUBINs through `cuobjdump -sass` (cuobjdump and the nvdisasm it calls come from PyPI's
nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm; .ci/install-deps puts them in a venv) and checks
what the data path promises, per function:

  * an innermost loop (a backward branch and the instructions it jumps over, holding no other
    loop) that moves data is a data loop: it holds an LDG.E.128 or STG.E.128. The widest data loop
    of the data-loop function (tuccl::dev::reduceCopy, or the kernel where NVRTC inlined it) must
    hold at least --min-loads (8) LDG.E.128;
  * no data loop holds a local-memory access (LDL, STL: a spill);
  * a poll loop holds a strong load of a 64-bit flag (LD/LDG .E.64 .STRONG) and no store: it must
    hold no system-scope fence (MEMBAR .SC.SYS / .ALL.SYS, FENCE.*SYS).

Prints one line per CUBIN and exits 1 when a check fails, 2 when a CUBIN cannot be read.

Usage: sass_census.py [--cuobjdump PATH] [--min-loads N] CUBIN...
"""
import argparse
import re
import shutil
import subprocess
import sys

INSTRUCTION = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
FUNCTION = re.compile(r"^\s*Function : (\S+)")
BRANCH = re.compile(r"\bBRA\b(?:\s+\S+,)?\s+(0x[0-9a-f]+)")
DATA_FUNCTION = "_ZN5tuccl3dev10reduceCopy"


def functions(sass):
    """{name: [(address, text)]} of every function in a cuobjdump -sass listing."""
    result = {}
    current = None
    for line in sass.splitlines():
        match = FUNCTION.match(line)
        if match:
            current = result.setdefault(match.group(1), [])
            continue
        match = INSTRUCTION.search(line)
        if match and current is not None:
            current.append((int(match.group(1), 16), match.group(2)))
    return result


def loops(code):
    """The innermost loops of a function: the instructions from a backward branch's target to the
    branch, for the branches whose span holds no other loop (an outer loop around a data loop is
    not itself a data loop, and may save registers around calls)."""
    spans = []
    for index, (address, text) in enumerate(code):
        match = BRANCH.search(text)
        if match and int(match.group(1), 16) <= address:
            spans.append((int(match.group(1), 16), address, index))
    found = []
    for target, address, index in spans:
        if any((t, a) != (target, address) and target <= t and a <= address for t, a, _ in spans):
            continue
        body = [t for (a, t) in code[: index + 1] if a >= target]
        found.append((target, address, body))
    return found


def is_data_loop(body):
    return any("LDG.E.128" in t or "STG.E.128" in t for t in body)


def is_poll_loop(body):
    loads = any(re.search(r"\bLDG?\.E\.64\.STRONG", t) for t in body)
    stores = any(re.search(r"\b(ST|STG|STS|ATOM|RED)\b", t.split()[0] if not t.startswith("@") else t.split()[1])
                 for t in body if t.strip())
    return loads and not stores


def system_fence(text):
    return re.search(r"MEMBAR\.(SC|ALL)\.SYS|FENCE\.\S*SYS", text) is not None


def census(path, cuobjdump, min_loads):
    run = subprocess.run([cuobjdump, "-sass", path], capture_output=True, text=True)
    if run.returncode != 0:
        print(f"{path}: cuobjdump failed: {run.stderr.strip()}", file=sys.stderr)
        return None
    problems = []
    widest = 0
    data_loops = poll_loops = 0
    funcs = functions(run.stdout)
    # The data loops live in tuccl::dev::reduceCopy; a kernel with one call of it may have it
    # inlined, and then its loops are the kernel's.
    separate = any(name.startswith(DATA_FUNCTION) for name in funcs)
    for name, code in funcs.items():
        for start, end, body in loops(code):
            if is_data_loop(body):
                data_loops += 1
                if name.startswith(DATA_FUNCTION) or not separate:
                    widest = max(widest, sum("LDG.E.128" in t for t in body))
                spills = [t for t in body if re.match(r"(@!?U?P\w+\s+)?(LDL|STL)\b", t)]
                if spills:
                    problems.append(f"{name} data loop {start:#x}..{end:#x}: local memory ({spills[0]})")
            elif is_poll_loop(body):
                poll_loops += 1
                fences = [t for t in body if system_fence(t)]
                if fences:
                    problems.append(f"{name} poll loop {start:#x}..{end:#x}: system fence ({fences[0]})")
    if widest < min_loads:
        problems.append(f"widest data loop holds {widest} LDG.E.128, fewer than {min_loads}")
    return widest, data_loops, poll_loops, problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cuobjdump", default=shutil.which("cuobjdump") or "cuobjdump")
    parser.add_argument("--min-loads", type=int, default=8)
    parser.add_argument("cubins", nargs="+")
    args = parser.parse_args()
    failed = False
    for path in args.cubins:
        result = census(path, args.cuobjdump, args.min_loads)
        if result is None:
            return 2
        widest, data_loops, poll_loops, problems = result
        verdict = "ok" if not problems else "FAILED"
        print(f"{path}: {verdict}: widest data loop {widest} x LDG.E.128, {data_loops} data loops, "
              f"{poll_loops} poll loops")
        for problem in problems:
            print(f"  {problem}")
        failed = failed or bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
