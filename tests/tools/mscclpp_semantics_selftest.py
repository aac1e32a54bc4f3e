#!/usr/bin/env python3
"""Proves mscclpp_semantics.py catches broken MSCCL++ execution plans: hand-made breakages of a
small hand-written plan (below) and of TuCCL's own exports, each of which the checker must reject
with the expected message (and the unbroken files it must accept).

Usage: mscclpp_semantics_selftest.py CHECKER EXPORT_DIR
"""

import copy
import json
import os
import subprocess
import sys
import tempfile


def hand_written():
    """A 2-rank in-place AllGather written by hand: each rank puts its chunk straight into the
    peer's output, then signals; the peer waits."""
    def gpu(r):
        peer = 1 - r
        return {
            "id": r, "input_chunks": 1, "output_chunks": 2, "scratch_chunks": 0,
            "channels": [{"channel_type": "memory", "connected_to": [peer]}],
            "remote_buffers": [{"rank": peer, "type": "o", "access_channel_types": ["memory"]}],
            "threadblocks": [{
                "id": 0,
                "channels": [{"channel_type": "memory", "channel_ids": [0]}],
                "remote_buffer_refs": [{"access_channel_type": "memory", "remote_buffer_ids": [0]}],
                "ops": [
                    {"name": "put", "channel_type": "memory", "channel_ids": [0],
                     "src_buff": [{"type": "o", "index": r, "size": 1}],
                     "dst_buff": [{"buffer_id": 0, "index": r, "size": 1}]},
                    {"name": "nop"},
                    {"name": "signal", "channel_type": "memory", "channel_ids": [0]},
                    {"name": "wait", "channel_type": "memory", "channel_ids": [0]},
                ]}],
        }
    return {"name": "hand_allgather", "collective": "allgather", "protocol": "Simple", "inplace": True,
            "gpus": [gpu(0), gpu(1)]}


def ops(doc, g, t):
    return doc["gpus"][g]["threadblocks"][t]["ops"]


def find(doc, g, t, name, nth=0):
    hits = [i for i, op in enumerate(ops(doc, g, t)) if op["name"] == name]
    return hits[nth]


def delete(g, t, name, nth=0, after=0):
    def mutate(doc):
        del ops(doc, g, t)[find(doc, g, t, name, nth) + after]
    return mutate


def set_key(path, value):
    def mutate(doc):
        node = doc
        for key in path[:-1]:
            node = node[key]
        if value is None:
            del node[path[-1]]
        else:
            node[path[-1]] = value
    return mutate


def edit_op(g, t, name, field, value, nth=0):
    def mutate(doc):
        op = ops(doc, g, t)[find(doc, g, t, name, nth)]
        if callable(value):
            value(op)
        else:
            op[field] = value
    return mutate


def append_ops(g, t, new_ops):
    def mutate(doc):
        ops(doc, g, t).extend(copy.deepcopy(new_ops))
    return mutate


def shift_put(doc):
    op = ops(doc, 0, 0)[find(doc, 0, 0, "put")]
    op["dst_buff"][0]["index"] += 1000


def reduce_to_copy(doc):
    for g in doc["gpus"]:
        for tb in g["threadblocks"]:
            for op in tb["ops"]:
                if op["name"] == "re":
                    op["name"] = "copy"
                    op["src_buff"] = op["src_buff"][1:]
                    return
    raise AssertionError("no re op")


def pwsf_to_pws(doc):
    """The last pwsf of a thread block becomes pws: nothing flushes it before the end."""
    for g in doc["gpus"]:
        for tb in g["threadblocks"]:
            puts = [op for op in tb["ops"] if op["name"] == "pwsf"]
            if puts:
                puts[-1]["name"] = "pws"
                return
    raise AssertionError("no pwsf op")


def port_access_only(doc):
    for b in doc["gpus"][0]["remote_buffers"]:
        b["access_channel_types"] = ["port"] if b["access_channel_types"] == ["memory"] else ["memory"]


def many_semaphores(doc):
    doc["gpus"][0]["semaphores"] = [{"init_value": 0}] * 17


def over_port_then_overwrite(doc):
    """The hand-written plan over port channels, where gpu 0 rewrites the source of its put (after
    a nop, so only the missing flush is wrong) before the flush at its end."""
    for g in doc["gpus"]:
        g["channels"][0]["channel_type"] = "port"
        g["remote_buffers"][0]["access_channel_types"] = ["port"]
        tb = g["threadblocks"][0]
        tb["channels"][0]["channel_type"] = "port"
        tb["remote_buffer_refs"][0]["access_channel_type"] = "port"
        for op in tb["ops"]:
            if "channel_type" in op:
                op["channel_type"] = "port"
        tb["ops"].append({"name": "flush", "channel_type": "port", "channel_ids": [0]})
    r = 0
    ops(doc, 0, 0)[3:3] = [{"name": "nop"}, {"name": "copy", "src_buff": [{"type": "o", "index": r, "size": 1}],
                                               "dst_buff": [{"type": "o", "index": r, "size": 1}]}]


def invalid_json(_):
    return "{not json"


HAND = [
    ("missing protocol", set_key(["protocol"], None), "the required key 'protocol' is missing"),
    ("gpu id", set_key(["gpus", 1, "id"], 0), "gpu 1: id is 0, expected 1"),
    ("unknown op", edit_op(0, 0, "nop", "name", "teleport"), "invalid operation type 'teleport'"),
    ("DSL-only glre", edit_op(0, 0, "nop", "name", "glre"), "invalid operation type 'glre'"),
    ("no nop before the signal", delete(0, 0, "nop"), "signal follows gpu 0 tb 0 op 0 with no nop between"),
    ("no signal", delete(1, 0, "signal"), "deadlock: gpu 0 tb 0 op 3 waits for a signal from gpu 1"),
    ("no wait", delete(1, 0, "wait"), "gpu 0 signals gpu 1 1 time(s)"),
    ("put outside the peer's output", shift_put, "are outside its 2 chunks"),
    ("put into the own chunk of the peer", edit_op(0, 0, "put", None, lambda op: op["dst_buff"][0].update(index=1)),
     "touch o[1] of gpu 1 without an order between them (race)"),
    ("65 ops", append_ops(0, 0, [{"name": "nop"}] * 61), "65 ops, the executor allows 64"),
    ("9 channels in an op", edit_op(0, 0, "signal", "channel_ids", [0] * 9), "9 channels, the executor allows 8"),
    ("channel out of range", edit_op(0, 0, "signal", "channel_ids", [3]), "channel id 3 is not one of"),
    ("buffer id out of range", edit_op(0, 0, "put", None, lambda op: op["dst_buff"][0].update(buffer_id=2)),
     "buffer_id 2 is not one of the thread block's memory remote buffers"),
    ("remote buffer not reachable", port_access_only, "is not accessible through memory channels"),
    ("barrier id 16", append_ops(0, 0, [{"name": "barrier", "barrier_id": 16, "num_threadblocks": 1}]),
     "barrier_id 16 is not below 16"),
    ("undeclared semaphore", append_ops(0, 0, [{"name": "sem_release", "semaphore_ids": [0]}]),
     "semaphore 0 is not declared"),
    ("17 semaphores", many_semaphores, "17 semaphores, the executor allows 16"),
    ("zero input chunks", set_key(["gpus", 0, "input_chunks"], 0), "must be non-zero"),
    ("not JSON", invalid_json, "not valid JSON"),
    ("port put source overwritten before a flush", over_port_then_overwrite,
     "overwrites o[0] of gpu 0, the source of the port put gpu 0 tb 0 op 0, before a flush"),
]

# Breakages of TuCCL's export of a 2-node ring AllReduce, unfused (memory and port channels,
# semaphores between its two thread blocks, the out-of-place barrier).
EXPORT = "ring_allreduce.n4.state-unfused.nodes2.outofplace.json"
EXPORTED = [
    ("no nop after a wait", delete(0, 1, "wait", 0, 1), "with no nop between (threads may run it before the wait)"),
    ("no sem_acquire", delete(0, 0, "sem_acquire"), "without an order between them (race)"),
    ("no sem_release", delete(0, 0, "sem_release"), "deadlock"),
    ("extra signal", append_ops(0, 0, [{"name": "signal", "channel_type": "memory", "channel_ids": [0]}]),
     "gpu 0 signals gpu 1 7 time(s)"),
    ("a lost contribution", reduce_to_copy, "expected {0:"),
    ("no barrier", delete(0, 1, "barrier"), "touch o["),
    ("port put never flushed", pwsf_to_pws, "a port put not flushed"),
    ("no copy into the output", delete(0, 0, "copy"), "which nothing wrote"),
]


def run_checker(checker, doc_or_text, extra):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        f.write(doc_or_text if isinstance(doc_or_text, str) else json.dumps(doc_or_text))
        path = f.name
    try:
        result = subprocess.run([sys.executable, checker, path] + extra, capture_output=True, text=True)
    finally:
        os.unlink(path)
    return result.returncode, result.stdout + result.stderr


def check(checker, base, cases, extra):
    failures = 0
    code, out = run_checker(checker, base, extra)
    if code != 0:
        print("FAIL: the unbroken file is rejected: %s" % out.strip())
        failures += 1
    for name, mutate, expected in cases:
        doc = copy.deepcopy(base)
        text = mutate(doc)
        code, out = run_checker(checker, text if isinstance(text, str) else doc, extra)
        if code != 1 or expected not in out:
            print("FAIL: %s: expected exit 1 and %r, got exit %d: %s" % (name, expected, code, out.strip()))
            failures += 1
        else:
            print("ok: %s" % name)
    return failures


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    checker, export_dir = argv
    failures = check(checker, hand_written(), HAND, [])
    with open(os.path.join(export_dir, EXPORT), encoding="utf-8") as f:
        exported = json.load(f)
    failures += check(checker, exported, EXPORTED, ["--ranks-per-node", "2"])
    code, out = run_checker(checker, exported, ["--ranks-per-node", "1"])
    if code != 1 or "on another node" not in out:
        print("FAIL: a memory channel between nodes is accepted: %s" % out.strip())
        failures += 1
    print("%d failure(s)" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
