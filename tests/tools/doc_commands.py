#!/usr/bin/env python3
"""The commands the README and docs/ show, run as written, so the documents cannot drift from the
tools.

Every fenced ```sh block of README.md and docs/*.md is read; a command (continuation lines joined)
is run when it starts with a program of the build tree (build/tools/..., build/tests/...), bench/,
or VAR=value assignments before one. Commands that name what only the reader has (your_..., <...>,
a GPU: --arch, TUCCL_DEVICE=cuda unless on the fake driver) are listed as skipped, with why. Each command runs under bash in
a scratch directory that holds the repository's examples/, tests/ and bench/ and the build tree as
build/, with a time limit (past it, the command's process group is killed); its exit status must
be 0, or the one the line's comment promises ("exit 2 ..."). A command that fails otherwise than by
its time limit runs a second time: a failure it does not repeat is printed (RERUN, with the first
run's output) and counted in the summary, one it repeats fails the test.

usage: doc_commands.py SOURCE_DIR BUILD_DIR [--list] [--only REGEX] [--timeout SECONDS]
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

FENCE = re.compile(r"^```(\w*)\s*$")
RUNNABLE = re.compile(r"^(?:[A-Z_][A-Z0-9_]*=\S*\s+)*(?:build/(?:tools|tests|bench)/|bench/)")
# Placeholders and what this machine (and CI) cannot run: skipped, with the reason.
SKIP = [
    (re.compile(r"your_|<[a-z]"), "names the reader's own program or file"),
    # (the CUDA device on the fake driver of the build tree runs here)
    (re.compile(r"^(?!.*libtuccl-fake-cuda).*(?:TUCCL_DEVICE=cuda|--device cuda)"), "needs a GPU"),
    (re.compile(r"LD_PRELOAD=\S*libtuccl-nccl"), "needs the reader's NCCL program"),
]


def commands(path):
    """(line number, command, expected exit status) of every runnable command in the file."""
    found, block, start, lines = [], None, 0, open(path, encoding="utf-8").read().splitlines()
    for number, line in enumerate(lines, 1):
        fence = FENCE.match(line)
        if fence:
            block = (fence.group(1) or "text") if block is None else None
            continue
        if block not in ("sh", "bash", "shell"):
            continue
        found.append((number, line))
    joined, pending, first = [], "", 0
    for number, line in found:
        text = line.rstrip()
        if not pending:
            first = number
        if text.endswith("\\"):
            pending += text[:-1] + " "
            continue
        joined.append((first, pending + text))
        pending = ""
    result = []
    for number, text in joined:
        command, _, comment = text.partition("  #")
        command = command.strip()
        if not RUNNABLE.match(command):
            continue
        expected = 2 if re.search(r"\bexit 2\b", comment) else 0
        result.append((number, command, expected))
    return result


def skip_reason(command):
    for pattern, why in SKIP:
        if pattern.search(command):
            return why
    return None


def scratch(source, build):
    work = tempfile.mkdtemp(prefix="tuccl-doc-commands.")
    for name in ("examples", "tests", "bench"):
        os.symlink(os.path.join(source, name), os.path.join(work, name))
    os.symlink(build, os.path.join(work, "build"))
    os.mkdir(os.path.join(work, "out"))
    return work


def run_command(command, work, environment, timeout):
    """(exit status or "timeout", output, seconds) of one command run under bash in `work`."""
    begun = time.monotonic()
    # Its own process group, so a command past its limit is ended with everything it started.
    process = subprocess.Popen(["bash", "-c", command], cwd=work, env=environment, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, errors="replace", start_new_session=True)
    try:
        output, _ = process.communicate(timeout=timeout)
        status = process.returncode
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        status = "timeout"
    return status, output, time.monotonic() - begun


def tail(output):
    return "\n".join("     | " + line for line in output.splitlines()[-30:])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("source")
    parser.add_argument("build")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--only", default="")
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()
    source, build = os.path.realpath(args.source), os.path.realpath(args.build)
    files = [os.path.join(source, "README.md")] + sorted(
        os.path.join(source, "docs", name) for name in os.listdir(os.path.join(source, "docs")) if name.endswith(".md"))
    todo = []
    for path in files:
        for number, command, expected in commands(path):
            where = f"{os.path.relpath(path, source)}:{number}"
            if args.only and not re.search(args.only, where + " " + command):
                continue
            todo.append((where, command, expected, skip_reason(command)))
    if not todo and not args.only:
        print("no command found in README.md or docs/: the fence or command patterns no longer match")
        return 1
    if args.list:
        for where, command, expected, why in todo:
            print(f"{where}: {'skip (' + why + ')' if why else 'run'}: {command}")
        return 0
    work = scratch(source, build)
    failed, flaky = 0, []
    try:
        environment = dict(os.environ, TUCCL_DEVICE="cpu", TUCCL_CACHE_DIR=os.path.join(work, "cache"),
                           TUCCL_KERNELGEN_CACHE=os.path.join(work, "kernel-cache"))
        for where, command, expected, why in todo:
            if why:
                print(f"SKIP {where}: {why}: {command}", flush=True)
                continue
            status, output, seconds = run_command(command, work, environment, args.timeout)
            first = None
            if status != expected and status != "timeout":
                # A failure that a second run does not repeat is reported, with its output, and
                # counted: the machine is shared with the rest of the tests, a document is not wrong.
                first = (status, output, seconds)
                status, output, seconds = run_command(command, work, environment, args.timeout)
                if status == expected:
                    flaky.append(where)
                    print(f"RERUN {where}: the first run exited {first[0]} after {first[2]:.1f} s; the second "
                          f"passed: {command}\n" + tail(first[1]), flush=True)
            if status == expected:
                print(f"ok   {where} ({seconds:.1f} s): {command}", flush=True)
                continue
            failed += 1
            if first is not None:  # the first run's output: the second may fail for another reason
                print(f"FAIL {where} (first run: exit {first[0]}, {first[2]:.1f} s): {command}\n" + tail(first[1]),
                      flush=True)
            print(f"FAIL {where} (exit {status}, expected {expected}, {seconds:.1f} s): {command}\n" + tail(output),
                  flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if flaky:
        print(f"{len(flaky)} commands passed only when run again: {', '.join(flaky)}")
    print(f"{failed} of {len(todo)} commands failed" if failed else f"all {len(todo)} commands as documented")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
