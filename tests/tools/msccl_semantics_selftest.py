#!/usr/bin/env python3
"""Proves msccl_semantics.py catches broken MSCCL XML: hand-made breakages of a small valid file
(tests/data/msccl/ring_allreduce_2.xml) and of TuCCL's own exports, each of which the checker must
reject with the expected message (and the unbroken files it must accept).

Usage: msccl_semantics_selftest.py CHECKER DATA_DIR EXPORT_DIR
"""

import os
import re
import subprocess
import sys
import tempfile

GPU0_TB0 = '<tb id="0" send="1" recv="1" chan="0">'


def step(gpu_text, s):
    """The exact line of step s in the given text block."""
    m = re.search(r'<step s="%d" [^>]*/>' % s, gpu_text)
    return m.group(0)


def gpu_block(text, gpu):
    start = text.index('<gpu id="%d"' % gpu)
    return start, text.index("</gpu>", start)


def edit_step(text, gpu, tb, s, old, new):
    """Replaces `old` by `new` in step s of tb of gpu."""
    g0, g1 = gpu_block(text, gpu)
    t0 = text.index('<tb id="%d"' % tb, g0, g1)
    t1 = text.index("</tb>", t0)
    block = text[t0:t1]
    line = step(block, s)
    assert old in line, (old, line)
    block = block.replace(line, line.replace(old, new, 1), 1)
    return text[:t0] + block + text[t1:]


def swap_steps(text, gpu, tb, a, b):
    g0, g1 = gpu_block(text, gpu)
    t0 = text.index('<tb id="%d"' % tb, g0, g1)
    t1 = text.index("</tb>", t0)
    block = text[t0:t1]
    la, lb = step(block, a), step(block, b)
    na = lb.replace('s="%d"' % b, 's="%d"' % a, 1)
    nb = la.replace('s="%d"' % a, 's="%d"' % b, 1)
    block = block.replace(la, "\0", 1).replace(lb, nb, 1).replace("\0", na, 1)
    return text[:t0] + block + text[t1:]


def replace_once(old, new):
    def mutate(text):
        assert old in text, old
        return text.replace(old, new, 1)
    return mutate


def many_steps(text):
    steps = "".join('      <step s="%d" type="cpy" srcbuf="i" srcoff="0" dstbuf="s" dstoff="0" cnt="1" depid="-1" '
                    'deps="-1" hasdep="0"/>\n' % s for s in range(65))
    return text.replace("  </gpu>\n  <gpu id=\"1\"", '    <tb id="2" send="-1" recv="-1" chan="0">\n' + steps +
                        "    </tb>\n  </gpu>\n  <gpu id=\"1\"", 1)


# (name, mutation, message part the checker must print)
HAND_BROKEN = [
    ("prolog", lambda t: '<?xml version="1.0"?>\n' + t, "prolog"),
    ("doctype", lambda t: "<!DOCTYPE algo>\n" + t, "DOCTYPE"),
    ("start tag over two lines", replace_once(' proto="Simple"', '\n proto="Simple"'), "spans several lines"),
    ("double space", replace_once(' proto="Simple"', '  proto="Simple"'), "more than one space"),
    ("single quotes", replace_once('name="ring2"', "name='ring2'"), "is not name="),
    ("17 attributes", replace_once(' maxBytes="0"', ' maxBytes="0"' + "".join(' x%d="0"' % i for i in range(7))),
     "17 attributes"),
    ("text content", replace_once("</tb>", "</tb> text"), "text content"),
    ("missing outofplace", replace_once(' outofplace="0"', ""), "lacks the attribute outofplace"),
    ("missing hasdep", lambda t: edit_step(t, 1, 0, 0, ' hasdep="0"', ""), "lacks the attribute hasdep"),
    ("unknown coll", replace_once('coll="allreduce"', 'coll="all_reduce"'), "coll='all_reduce'"),
    ("bad proto", replace_once('proto="Simple"', 'proto="simple"'), "proto="),
    ("cnt 72", lambda t: edit_step(t, 1, 0, 0, 'cnt="1"', 'cnt="72"'), "cnt=72"),
    ("steps out of order", lambda t: edit_step(t, 1, 0, 2, 's="2"', 's="5"'), "numbered 0, 1, 2"),
    ("tb id gap", replace_once('<tb id="1" send="-1"', '<tb id="2" send="-1"'), "without gaps"),
    ("send to itself", replace_once(GPU0_TB0, '<tb id="0" send="0" recv="1" chan="0">'), "the gpu itself"),
    ("chan not below nchannels", replace_once(GPU0_TB0, '<tb id="0" send="1" recv="1" chan="1">'), "not below nchannels"),
    ("type ra", lambda t: edit_step(t, 1, 0, 1, 'type="rrc"', 'type="ra"'), "'ra'"),
    ("unknown type", lambda t: edit_step(t, 1, 0, 1, 'type="rrc"', 'type="rr"'), "unknown step type"),
    ("receive without a recv peer", replace_once(GPU0_TB0, '<tb id="0" send="1" recv="-1" chan="0">'),
     "needs a recv peer"),
    ("offset out of range", lambda t: edit_step(t, 1, 0, 1, 'dstoff="1"', 'dstoff="2"'), "outside the 2 chunks"),
    ("i_chunks", replace_once('<gpu id="1" i_chunks="2"', '<gpu id="1" i_chunks="3"'), "i_chunks=3"),
    ("gpu missing", lambda t: re.sub(r'  <gpu id="1".*?</gpu>\n', "", t, flags=re.S),
     "ngpus is 2 but the gpus listed are [0]"),
    ("two tbs on one connection",
     replace_once('<tb id="1" send="-1" recv="-1" chan="0">', '<tb id="1" send="1" recv="-1" chan="0">'),
     "one connection, one FIFO"),
    ("dependency without hasdep", lambda t: edit_step(t, 0, 0, 1, 'hasdep="1"', 'hasdep="0"'), "hasdep is 0"),
    ("nop without a dependency", lambda t: edit_step(t, 0, 1, 0, 'depid="0" deps="1"', 'depid="-1" deps="-1"'),
     "a nop without a dependency"),
    ("step after nops without a dependency", lambda t: edit_step(t, 0, 1, 1, 'depid="0" deps="3"', 'depid="-1" deps="-1"'),
     "follows dependency nops"),
    ("depid without deps", lambda t: edit_step(t, 0, 1, 1, 'deps="3"', 'deps="-1"'), "both or neither"),
    ("dependency on itself", lambda t: edit_step(t, 0, 1, 1, 'depid="0"', 'depid="1"'), "the tb itself"),
    ("dependency on a missing step", lambda t: edit_step(t, 0, 1, 1, 'deps="3"', 'deps="4"'), "has 4 steps"),
    ("65 steps in one tb (executor)", many_steps, "runs at most 64 per tb"),
    ("race: copy before the last write", lambda t: edit_step(edit_step(t, 0, 1, 1, 'depid="0" deps="3"', 'depid="0" deps="1"'),
                                                             0, 1, 1, 'srcoff="0"', 'srcoff="1"'), "race"),
    ("lost contribution (r instead of rrc)", lambda t: edit_step(t, 1, 0, 1, 'type="rrc"', 'type="r"'),
     "output chunk 1 holds {0:1}, expected {0:1, 1:1}"),
    ("double contribution (rrc instead of r)", lambda t: edit_step(t, 0, 0, 3, 'type="r"', 'type="rrc"'),
     "0:1 x2"),
    ("paired steps with different cnt", lambda t: edit_step(t, 1, 0, 0, 'cnt="1"', 'cnt="2"'), "sends cnt 2"),
    ("deadlock: both receive first", lambda t: swap_steps(swap_steps(t, 0, 0, 0, 1), 1, 0, 0, 1), "deadlock"),
    ("send never received", replace_once(
        '    </tb>\n    <tb id="1" send="-1"',
        '      <step s="4" type="s" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>\n'
        '    </tb>\n    <tb id="1" send="-1"'), "more step(s)"),
    ("read of a chunk never written", lambda t: edit_step(t, 0, 1, 1, 'srcbuf="i"', 'srcbuf="s"'), "which nothing wrote"),
]


def run_checker(checker, path, runtime="executor", root=0):
    result = subprocess.run([sys.executable, checker, "--runtime", runtime, "--root", str(root), path],
                            capture_output=True, text=True)
    return result.returncode, result.stdout + result.stderr


def expect(checker, directory, name, text, message, failures, runtime="executor", root=0):
    path = os.path.join(directory, re.sub(r"[^A-Za-z0-9]+", "_", name) + ".xml")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    code, output = run_checker(checker, path, runtime, root)
    if message is None:
        ok = code == 0
    else:
        ok = code == 1 and message in output
    if not ok:
        failures.append("%s: expected %s, got exit %d: %s" % (name, "a pass" if message is None else repr(message),
                                                               code, output.strip()))


def exported_breakages(export_dir):
    """Breakages of TuCCL's own exports: (file, runtime, root, name, mutation, message)."""
    hm = "hm_allreduce.state.c2.inplace.executor.xml"
    single = "hm_allreduce.single.c1.inplace.executor.xml"
    alltoall = "direct_alltoall.state.c1.outofplace.executor.xml"
    return [
        (hm, "executor", 0, "every hasdep cleared", lambda t: t.replace('hasdep="1"', 'hasdep="0"'), "hasdep is 0"),
        (hm, "msccl", 0, "executor spelling on msccl: reducescatter", lambda t: t.replace('coll="allreduce"', 'coll="reducescatter"'),
         "is not one msccl reads"),
        (single, "executor", 0, "rrcs turned into rcs", lambda t: t.replace('type="rrcs"', 'type="rcs"'), "output chunk"),
        (alltoall, "executor", 0, "prologue copy dropped",
         lambda t: re.sub(r'(<step s="\d+" type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0") cnt="(\d+)"',
                          r'\1 cnt="1"', t), "which nothing wrote"),
    ]


def main(argv):
    if len(argv) != 3:
        print(__doc__)
        return 2
    checker, data_dir, export_dir = argv
    failures = []
    with open(os.path.join(data_dir, "ring_allreduce_2.xml"), encoding="utf-8") as f:
        valid = f.read()
    with tempfile.TemporaryDirectory() as directory:
        expect(checker, directory, "valid", valid, None, failures)
        for name, mutate, message in HAND_BROKEN:
            broken = mutate(valid)
            if broken == valid:
                failures.append("%s: the mutation changed nothing" % name)
                continue
            expect(checker, directory, name, broken, message, failures)
        for file, runtime, root, name, mutate, message in exported_breakages(export_dir):
            with open(os.path.join(export_dir, file), encoding="utf-8") as f:
                text = f.read()
            broken = mutate(text)
            if message is not None and broken == text:
                failures.append("%s: the mutation changed nothing" % name)
                continue
            expect(checker, directory, name, broken, message, failures, runtime, root)
    for failure in failures:
        print("FAIL " + failure)
    print("%d broken files checked, %d failures" % (len(HAND_BROKEN) + len(exported_breakages(export_dir)), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
