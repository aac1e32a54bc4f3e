#!/usr/bin/env python3
"""An independent checker of MSCCL++ execution plans (JSON; Python 3 standard library only).

It reads a plan the way mscclpp's executor does (execution_plan.cc, executor.cc) and runs it
symbolically:

1. the keys the parser requires (a missing one throws there), `gpus[r].id == r`, thread block
   ids in order, known op names, non-zero input and output chunk counts;
2. the executor's limits: 64 ops per thread block (pipeline ops counted), 16 memory and 16 port
   channels per thread block, 8 channels per op, 2 local and 8 remote operands per list, barrier
   ids and semaphores below 16; every channel index, remote buffer id and chunk range in range;
3. the wiring of executor.cc: the k-th channel of a type from A to B meets the k-th from B to A;
   memory channels only inside a node (--ranks-per-node); a remote operand names a buffer of the
   channel's peer that is reachable through the op's channel type;
4. a symbolic run: each thread block runs its ops in order; `put` writes the peer's buffer,
   `signal` / `wait` count per connection, `barrier` joins `num_threadblocks` blocks of a GPU,
   `sem_release` / `sem_acquire` count per semaphore, `copy`, `re`, `rre`, `get`; chunk contents
   are multisets of (rank, chunk) contributions. Vector clocks find two thread blocks touching a
   chunk (one writing) without an order between them, and a read of a chunk nothing wrote; inside
   a thread block, ops between two nops run on different threads, so a data op after a wait or
   acquire, a signal or release after a data op, or two ops touching a chunk (one writing) need a
   nop between them; a port put's source must not change before a flush; a deadlock names every
   blocked thread block; signals and releases left over at the end are an error;
5. the collective's postcondition in the file's call layout (in place: NCCL's aliasing).

Usage: mscclpp_semantics.py [--root R] [--ranks-per-node N] FILE...
       mscclpp_semantics.py --manifest LIST   (lines "FILE ROOT [RANKS_PER_NODE]", FILE relative to LIST)
Exit status: 0 when every file passes, 1 when one fails (the first problem per file is printed as
"FILE: error: ..."), 2 for bad usage or an unreadable file.
"""

import argparse
import json
import os
import sys
from collections import Counter

MAX_OPS = 64
MAX_CHANNELS_PER_TB = 16
MAX_CHANNELS_PER_OP = 8
MAX_LOCAL = 2
MAX_REMOTE = 8
MAX_BARRIERS = 16
MAX_SEMAPHORES = 16
COLLECTIVES = ("allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall")
OPS = {"nop", "barrier", "signal", "wait", "rlxsignal", "rlxwait", "flush", "put", "pws", "pwsf", "get", "copy", "re",
       "res", "rre", "rres", "ppkt", "rppkt", "cpkt", "upkt", "repkt", "respkt", "recpkt", "recspkt", "glres", "gstore",
       "gstorepkt", "sem_acquire", "sem_release", "pipeline"}
# The ops this checker runs; the others are recognised and refused as outside its model.
SIMULATED = {"nop", "barrier", "signal", "wait", "flush", "put", "pws", "pwsf", "get", "copy", "re", "rre",
             "sem_acquire", "sem_release"}
DATA = {"put", "pws", "pwsf", "get", "copy", "re", "rre"}
CHANNEL_OPS = {"signal", "wait", "flush", "put", "pws", "pwsf", "get", "rre"}


class Violation(Exception):
    pass


def need(obj, key, where, kind=None):
    if not isinstance(obj, dict) or key not in obj:
        raise Violation("%s: the required key %r is missing" % (where, key))
    value = obj[key]
    if kind is int and (not isinstance(value, int) or isinstance(value, bool)):
        raise Violation("%s: %r is not an integer" % (where, key))
    if kind is not None and kind is not int and not isinstance(value, kind):
        raise Violation("%s: %r has the wrong type" % (where, key))
    return value


# ---- 1-3. structure, limits, wiring --------------------------------------------------------------

class Op:
    def __init__(self, raw, where):
        self.where = where
        self.name = need(raw, "name", where, str)
        if self.name not in OPS:
            raise Violation("%s: invalid operation type %r" % (where, self.name))
        if self.name not in SIMULATED:
            raise Violation("%s: op %r is outside what this checker simulates" % (where, self.name))
        self.channel_type = raw.get("channel_type", "none")
        self.channel_ids = raw.get("channel_ids", [])
        self.src = raw.get("src_buff", [])
        self.dst = raw.get("dst_buff", [])
        self.barrier_id = raw.get("barrier_id")
        self.num_threadblocks = raw.get("num_threadblocks")
        self.semaphore_ids = raw.get("semaphore_ids", [])
        if self.name in CHANNEL_OPS and (self.channel_type not in ("memory", "port") or not self.channel_ids):
            raise Violation("%s: %s needs a memory or port channel" % (where, self.name))
        if self.name == "barrier":
            need(raw, "barrier_id", where, int)
            need(raw, "num_threadblocks", where, int)
        if self.name in ("sem_acquire", "sem_release") and not self.semaphore_ids:
            raise Violation("%s: %s names no semaphore" % (where, self.name))


class Tb:
    def __init__(self, gpu, raw, where):
        self.gpu, self.where = gpu, where
        self.id = need(raw, "id", where, int)
        self.channels = {"memory": [], "port": []}
        for c in need(raw, "channels", where, list):
            kind = need(c, "channel_type", where + " channels", str)
            if kind in self.channels:
                self.channels[kind] += need(c, "channel_ids", where + " channels", list)
        self.buffers = {"memory": [], "port": []}
        for r in raw.get("remote_buffer_refs", []):
            kind = need(r, "access_channel_type", where + " remote_buffer_refs", str)
            if kind in self.buffers:
                self.buffers[kind] += need(r, "remote_buffer_ids", where + " remote_buffer_refs", list)
        self.ops = []
        count = 0
        for o, op in enumerate(need(raw, "ops", where, list)):
            if isinstance(op, dict) and op.get("name") == "pipeline":
                raise Violation("%s op %d: pipeline ops are outside what this checker simulates" % (where, o))
            self.ops.append(Op(op, "%s op %d" % (where, o)))
            count += 1
        if count > MAX_OPS:
            raise Violation("%s: %d ops, the executor allows %d per thread block" % (where, count, MAX_OPS))


class Plan:
    pass


def peer_lists(raw_channels, where):
    peers = {"memory": [], "port": []}
    for c in raw_channels:
        kind = need(c, "channel_type", where, str)
        if kind in peers:
            peers[kind] += need(c, "connected_to", where, list)
        elif kind != "switch":
            raise Violation("%s: unknown channel_type %r" % (where, kind))
    return peers


def parse(doc, ranks_per_node):
    p = Plan()
    for key in ("name", "collective", "protocol", "inplace", "gpus"):
        need(doc, key, "plan")
    p.collective = doc["collective"]
    if p.collective not in COLLECTIVES:
        raise Violation("plan: collective %r is not one of %s" % (p.collective, ", ".join(COLLECTIVES)))
    if doc["protocol"] not in ("Simple", "LL"):
        raise Violation("plan: protocol %r is neither Simple nor LL" % doc["protocol"])
    if doc["protocol"] != "Simple":
        raise Violation("plan: LL packet plans are outside what this checker simulates")
    p.inplace = need(doc, "inplace", "plan", bool)
    if doc.get("max_message_size", 2 ** 64 - 1) < doc.get("min_message_size", 0):
        raise Violation("plan: max_message_size is below min_message_size")
    p.gpus = []
    raw_gpus = need(doc, "gpus", "plan", list)
    p.n = len(raw_gpus)
    for r, g in enumerate(raw_gpus):
        where = "gpu %d" % r
        if need(g, "id", where, int) != r:
            raise Violation("%s: id is %d, expected %d" % (where, g["id"], r))
        for key in ("input_chunks", "output_chunks", "scratch_chunks"):
            need(g, key, where, int)
        if g["input_chunks"] <= 0 or g["output_chunks"] <= 0:
            raise Violation("%s: input_chunks and output_chunks must be non-zero (the size check divides by both)" % where)
        g["peers"] = peer_lists(need(g, "channels", where, list), where)
        g["remote"] = []
        for b, rb in enumerate(need(g, "remote_buffers", where, list)):
            rwhere = "%s remote_buffers[%d]" % (where, b)
            owner = need(rb, "rank", rwhere, int)
            if not 0 <= owner < len(raw_gpus) or owner == r:
                raise Violation("%s: rank %d is not another gpu" % (rwhere, owner))
            if need(rb, "type", rwhere, str) not in ("i", "o", "s"):
                raise Violation("%s: type %r is not i, o or s" % (rwhere, rb["type"]))
            g["remote"].append((owner, rb["type"], set(need(rb, "access_channel_types", rwhere, list))))
        g["nsem"] = len(g.get("semaphores", []))
        g["sem_init"] = [need(s, "init_value", where + " semaphores", int) for s in g.get("semaphores", [])]
        if g["nsem"] > MAX_SEMAPHORES:
            raise Violation("%s: %d semaphores, the executor allows %d" % (where, g["nsem"], MAX_SEMAPHORES))
        g["tbs"] = []
        for t, raw in enumerate(need(g, "threadblocks", where, list)):
            tb = Tb(r, raw, "gpu %d tb %d" % (r, t))
            if tb.id != t:
                raise Violation("%s: id is %d, expected %d" % (tb.where, tb.id, t))
            g["tbs"].append(tb)
        p.gpus.append(g)
    for g in p.gpus:
        for tb in g["tbs"]:
            check_tb(p, g, tb, ranks_per_node)
    return p


def check_range(p, g, ref, where):
    kind = ref.get("type")
    size = need(ref, "size", where, int)
    index = need(ref, "index", where, int)
    chunks = {"i": "input_chunks", "o": "output_chunks", "s": "scratch_chunks"}
    if kind not in chunks:
        raise Violation("%s: buffer type %r is not i, o or s" % (where, kind))
    if index < 0 or size <= 0 or index + size > g[chunks[kind]]:
        raise Violation("%s: chunks [%d, %d) of %s are outside its %d chunks" % (where, index, index + size, kind,
                                                                                 g[chunks[kind]]))


def check_tb(p, g, tb, ranks_per_node):
    for kind in ("memory", "port"):
        if len(tb.channels[kind]) > MAX_CHANNELS_PER_TB:
            raise Violation("%s: %d %s channels, the executor allows %d per thread block"
                            % (tb.where, len(tb.channels[kind]), kind, MAX_CHANNELS_PER_TB))
        for c in tb.channels[kind]:
            if not 0 <= c < len(g["peers"][kind]):
                raise Violation("%s: %s channel %d does not exist (the gpu has %d)"
                                % (tb.where, kind, c, len(g["peers"][kind])))
            peer = g["peers"][kind][c]
            if kind == "memory" and ranks_per_node and peer // ranks_per_node != tb.gpu // ranks_per_node:
                raise Violation("%s: memory channel %d connects gpu %d to gpu %d on another node (CUDA IPC only "
                                "reaches the own node)" % (tb.where, c, tb.gpu, peer))
    for op in tb.ops:
        if len(op.channel_ids) > MAX_CHANNELS_PER_OP:
            raise Violation("%s: %d channels, the executor allows %d per op" % (op.where, len(op.channel_ids),
                                                                               MAX_CHANNELS_PER_OP))
        op.peers = []
        for c in op.channel_ids:
            if op.channel_type not in tb.channels or not 0 <= c < len(tb.channels[op.channel_type]):
                raise Violation("%s: channel id %d is not one of the thread block's %s channels"
                                % (op.where, c, op.channel_type))
            op.peers.append(g["peers"][op.channel_type][tb.channels[op.channel_type][c]])
        for name in ("src", "dst"):
            refs = getattr(op, name)
            remote = [r for r in refs if "buffer_id" in r]
            if len(refs) - len(remote) > MAX_LOCAL or len(remote) > MAX_REMOTE:
                raise Violation("%s: %s_buff has too many operands" % (op.where, name))
            for ref in refs:
                rwhere = "%s %s_buff" % (op.where, name)
                if "buffer_id" in ref:
                    resolve_remote(p, g, tb, op, ref, rwhere)
                else:
                    check_range(p, g, ref, rwhere)
        if op.name == "barrier" and not 0 <= op.barrier_id < MAX_BARRIERS:
            raise Violation("%s: barrier_id %d is not below %d" % (op.where, op.barrier_id, MAX_BARRIERS))
        if op.name == "barrier" and not 1 <= op.num_threadblocks <= len(g["tbs"]):
            raise Violation("%s: num_threadblocks %d is not in [1, %d]" % (op.where, op.num_threadblocks, len(g["tbs"])))
        for s in op.semaphore_ids:
            if not 0 <= s < g["nsem"]:
                raise Violation("%s: semaphore %d is not declared (the gpu declares %d)" % (op.where, s, g["nsem"]))
        if op.name in ("put", "pws", "pwsf"):
            if len(op.src) != len(op.dst) or any("buffer_id" in r for r in op.src) or \
                    any("buffer_id" not in r for r in op.dst):
                raise Violation("%s: a put needs parallel local sources and remote destinations" % op.where)
        if op.name in ("copy", "re") and (any("buffer_id" in r for r in op.src + op.dst) or not op.src or not op.dst):
            raise Violation("%s: %s takes local operands" % (op.where, op.name))
        if op.name in ("pws", "pwsf", "flush") and op.channel_type != "port":
            raise Violation("%s: %s is a port channel op" % (op.where, op.name))


def resolve_remote(p, g, tb, op, ref, where):
    bid = need(ref, "buffer_id", where, int)
    refs = tb.buffers.get(op.channel_type, [])
    if not 0 <= bid < len(refs):
        raise Violation("%s: buffer_id %d is not one of the thread block's %s remote buffers" % (where, bid,
                                                                                               op.channel_type))
    if not 0 <= refs[bid] < len(g["remote"]):
        raise Violation("%s: remote buffer %d is not declared" % (where, refs[bid]))
    owner, kind, access = g["remote"][refs[bid]]
    if op.channel_type not in access:
        raise Violation("%s: remote buffer %d is not accessible through %s channels" % (where, refs[bid],
                                                                                       op.channel_type))
    if owner not in op.peers:
        raise Violation("%s: remote buffer %d belongs to gpu %d, but the op's channel reaches gpu %s"
                        % (where, refs[bid], owner, "/".join(map(str, op.peers))))
    ref["resolved"] = (owner, kind)
    check_range(p, p.gpus[owner], {"type": kind, "index": ref.get("index"), "size": ref.get("size")}, where)


def connection(p, rank, kind, channel):
    """The directed connection of a channel of `rank`: (kind, rank, peer, k), the k-th channel of the
    kind from rank to peer, which meets the k-th from peer to rank (executor.cc)."""
    peers = p.gpus[rank]["peers"][kind]
    peer = peers[channel]
    k = peers[:channel].count(peer)
    return (kind, rank, peer, k)


# ---- 4. intra-thread-block ordering (nops) ------------------------------------------------------

def local_ranges(refs):
    return [(r["type"], r["index"], r["index"] + r["size"]) for r in refs if "buffer_id" not in r]


def overlaps(a, b):
    return a[0] == b[0] and a[1] < b[2] and b[1] < a[2]


def check_nops(p, inplace):
    for g in p.gpus:
        for tb in g["tbs"]:
            sync = data = None
            reads, writes = [], []
            for op in tb.ops:
                if op.name in ("nop", "barrier"):
                    sync = data = None
                    reads, writes = [], []
                    continue
                r = [alias(p, tb.gpu, x, inplace) for x in local_ranges(op.src)]
                w = [alias(p, tb.gpu, x, inplace) for x in local_ranges(op.dst)]
                if op.name in DATA and sync:
                    raise Violation("%s: %s follows %s with no nop between (threads may run it before the wait)"
                                    % (op.where, op.name, sync))
                if op.name in ("signal", "sem_release") and data:
                    raise Violation("%s: %s follows %s with no nop between (it may publish unfinished data)"
                                    % (op.where, op.name, data))
                for x in w:
                    for y in reads + writes:
                        if overlaps(x, y):
                            raise Violation("%s: writes %s[%d, %d) that an op since the last nop touches, with no nop "
                                            "between" % (op.where, x[0], x[1], x[2]))
                for x in r:
                    for y in writes:
                        if overlaps(x, y):
                            raise Violation("%s: reads %s[%d, %d) that an op since the last nop writes, with no nop "
                                            "between" % (op.where, x[0], x[1], x[2]))
                if op.name in ("wait", "sem_acquire"):
                    sync = sync or op.where
                if op.name in DATA:
                    data = data or op.where
                reads += r
                writes += w


# ---- 4. symbolic run -----------------------------------------------------------------------------

def storage(p, rank, buf, index, inplace):
    """NCCL's aliasing of an in-place call."""
    if not inplace or buf == "s":
        return (buf, index)
    g = p.gpus[rank]
    if p.collective == "allgather":
        return ("o", rank * g["input_chunks"] + index) if buf == "i" else (buf, index)
    if p.collective == "reducescatter":
        return ("i", rank * g["output_chunks"] + index) if buf == "o" else (buf, index)
    return ("i", index)


def alias(p, rank, rng, inplace):
    buf, begin, end = rng
    s = storage(p, rank, buf, begin, inplace)
    return (s[0], s[1], s[1] + end - begin)


class Run:
    def __init__(self, p):
        self.p = p
        self.tbs = [tb for g in p.gpus for tb in g["tbs"]]
        self.n = len(self.tbs)
        self.pc = [0] * self.n
        self.clock = [[0] * self.n for _ in self.tbs]
        self.signals = {}    # connection -> list of sender clocks
        self.consumed = {}   # connection -> waits done
        self.sems = {}       # (gpu, id) -> list of release clocks (init tokens: zero clocks)
        self.acquired = {}
        self.barriers = {}   # (gpu, id) -> list of (k, clock) arrived in the current generation
        self.passed = set()  # k that passed the barrier they are at
        self.memory = {}
        self.access = {}
        self.pending = {}    # (gpu, k) -> [(slot, where)] port put sources not flushed yet
        for g in p.gpus:
            for s, init in enumerate(g["sem_init"]):
                self.sems[(g["id"], s)] = [[0] * self.n] * init
            for j in range(g["input_chunks"]):
                self.memory[(g["id"],) + storage(p, g["id"], "i", j, p.inplace)] = Counter({(g["id"], j): 1})

    def touch(self, k, key, write, where):
        clock = self.clock[k]
        last, reads = self.access.get(key, (None, []))
        earlier = ([last] if last else []) + (reads if write else [])
        for (other, epoch, other_where) in earlier:
            if other != k and clock[other] < epoch:
                raise Violation("%s and %s touch %s[%d] of gpu %d without an order between them (race)"
                                % (where, other_where, key[1], key[2], key[0]))
        if write:
            self.access[key] = ((k, clock[k], where), [])
            for (gk, kk), slots in self.pending.items():
                for slot, pwhere in slots:
                    if slot == key:
                        raise Violation("%s overwrites %s[%d] of gpu %d, the source of the port put %s, before a flush"
                                        % (where, key[1], key[2], key[0], pwhere))
        else:
            self.access[key] = (last, reads + [(k, clock[k], where)])

    def slots(self, rank, ref):
        if "resolved" in ref:
            rank, buf = ref["resolved"]
            return [(rank, buf, ref["index"] + c) for c in range(ref["size"])]
        return [(rank,) + storage(self.p, rank, ref["type"], ref["index"] + c, self.p.inplace) for c in range(ref["size"])]

    def read(self, k, rank, ref, where):
        values = []
        for key in self.slots(rank, ref):
            self.touch(k, key, False, where)
            if key not in self.memory:
                raise Violation("%s reads %s[%d] of gpu %d, which nothing wrote" % (where, key[1], key[2], key[0]))
            values.append(self.memory[key])
        return values

    def write(self, k, rank, ref, values, where):
        keys = self.slots(rank, ref)
        if len(keys) != len(values):
            raise Violation("%s: operand sizes differ" % where)
        for key, value in zip(keys, values):
            self.touch(k, key, True, where)
            self.memory[key] = value

    def blocked(self, k):
        tb = self.tbs[k]
        op = tb.ops[self.pc[k]]
        if op.name == "wait":
            for c in op.channel_ids:
                conn = connection(self.p, tb.gpu, op.channel_type, tb.channels[op.channel_type][c])
                back = (conn[0], conn[2], conn[1], conn[3])
                if len(self.signals.get(back, [])) <= self.consumed.get(back, 0):
                    return "waits for a signal from gpu %d" % conn[2]
        if op.name == "sem_acquire":
            for s in op.semaphore_ids:
                if len(self.sems.get((tb.gpu, s), [])) <= self.acquired.get((tb.gpu, s), 0):
                    return "waits for semaphore %d" % s
        if op.name == "barrier" and k not in self.passed:
            arrived = self.barriers.setdefault((tb.gpu, op.barrier_id), [])
            if all(kk != k for kk, _ in arrived):
                arrived.append((k, list(self.clock[k])))
            if len(arrived) < op.num_threadblocks:
                return "waits at barrier %d (%d of %d arrived)" % (op.barrier_id, len(arrived), op.num_threadblocks)
            joined = [max(c) for c in zip(*[c for _, c in arrived])]
            for kk, _ in arrived:
                self.passed.add(kk)
                self.clock[kk] = [max(a, b) for a, b in zip(self.clock[kk], joined)]
            self.barriers[(tb.gpu, op.barrier_id)] = []
        return None

    def join(self, k, other):
        self.clock[k] = [max(a, b) for a, b in zip(self.clock[k], other)]

    def execute(self, k):
        tb = self.tbs[k]
        op = tb.ops[self.pc[k]]
        self.clock[k][k] += 1
        rank = tb.gpu
        if op.name == "barrier":
            self.passed.discard(k)
        elif op.name == "wait":
            for c in op.channel_ids:
                conn = connection(self.p, rank, op.channel_type, tb.channels[op.channel_type][c])
                back = (conn[0], conn[2], conn[1], conn[3])
                i = self.consumed.get(back, 0)
                self.join(k, self.signals[back][i])
                self.consumed[back] = i + 1
        elif op.name == "sem_acquire":
            for s in op.semaphore_ids:
                i = self.acquired.get((rank, s), 0)
                self.join(k, self.sems[(rank, s)][i])
                self.acquired[(rank, s)] = i + 1
        elif op.name == "sem_release":
            for s in op.semaphore_ids:
                self.sems.setdefault((rank, s), []).append(list(self.clock[k]))
        elif op.name in ("put", "pws", "pwsf"):
            for src, dst in zip(op.src, op.dst):
                values = self.read(k, rank, src, op.where)
                if src["size"] != dst["size"]:
                    raise Violation("%s: source and destination sizes differ" % op.where)
                self.write(k, rank, dst, values, op.where)
                if op.channel_type == "port":
                    self.pending.setdefault((rank, k), []).extend((s, op.where) for s in self.slots(rank, src))
        elif op.name == "get":
            for src, dst in zip(op.src, op.dst):
                self.write(k, rank, dst, self.read(k, rank, src, op.where), op.where)
        elif op.name == "copy":
            self.write(k, rank, op.dst[0], self.read(k, rank, op.src[0], op.where), op.where)
        elif op.name in ("re", "rre"):
            values = self.read(k, rank, op.src[0], op.where)
            for extra in op.src[1:]:
                values = [a + b for a, b in zip(values, self.read(k, rank, extra, op.where))]
            self.write(k, rank, op.dst[0], values, op.where)
            for copy in op.dst[1:]:
                self.write(k, rank, copy, values, op.where)
        if op.name in ("flush", "pwsf"):
            self.pending.pop((rank, k), None)
        if op.name in ("signal", "pws", "pwsf"):
            for c in op.channel_ids:
                conn = connection(self.p, rank, op.channel_type, tb.channels[op.channel_type][c])
                self.signals.setdefault(conn, []).append(list(self.clock[k]))
        self.pc[k] += 1

    def run(self):
        remaining = sum(len(tb.ops) for tb in self.tbs)
        while remaining:
            progress = False
            for k, tb in enumerate(self.tbs):
                while self.pc[k] < len(tb.ops) and self.blocked(k) is None:
                    self.execute(k)
                    remaining -= 1
                    progress = True
            if not progress:
                stuck = ["%s %s" % (self.tbs[k].ops[self.pc[k]].where, self.blocked(k))
                         for k in range(self.n) if self.pc[k] < len(self.tbs[k].ops)]
                raise Violation("deadlock: " + "; ".join(stuck[:8]) + (" ..." if len(stuck) > 8 else ""))
        for conn, sent in sorted(self.signals.items()):
            if len(sent) != self.consumed.get(conn, 0):
                raise Violation("gpu %d signals gpu %d %d time(s) on its %s channel %d to it but is waited for %d "
                                "time(s)" % (conn[1], conn[2], len(sent), conn[0], conn[3], self.consumed.get(conn, 0)))
        for (rank, s), released in sorted(self.sems.items()):
            if len(released) != self.acquired.get((rank, s), 0):
                raise Violation("gpu %d semaphore %d ends with %d release(s) not acquired (the next call would start "
                                "with them)" % (rank, s, len(released) - self.acquired.get((rank, s), 0)))
        for (rank, _), slots in self.pending.items():
            if slots:
                raise Violation("gpu %d ends with a port put not flushed (%s)" % (rank, slots[0][1]))

    def output(self, rank, index):
        return self.memory.get((rank,) + storage(self.p, rank, "o", index, self.p.inplace))


def expected_output(p, rank, index, root):
    n = p.n
    g = p.gpus[rank]
    if p.collective == "allreduce":
        return Counter({(q, index): 1 for q in range(n)})
    if p.collective == "allgather":
        return Counter({(index // g["input_chunks"], index % g["input_chunks"]): 1})
    if p.collective == "reducescatter":
        return Counter({(q, rank * g["output_chunks"] + index): 1 for q in range(n)})
    if p.collective == "alltoall":
        block = g["input_chunks"] // n
        return Counter({(index // block, rank * block + index % block): 1})
    if p.collective == "broadcast":
        return Counter({(root, index): 1})
    if p.collective == "reduce":
        return Counter({(q, index): 1 for q in range(n)}) if rank == root else None
    raise Violation("collective %r has no postcondition this checker knows" % p.collective)


def describe(value):
    if value is None:
        return "nothing (never written)"
    return "{" + ", ".join("%d:%d%s" % (r, c, "" if m == 1 else " x%d" % m) for (r, c), m in sorted(value.items())) + "}"


def check_text(text, root, ranks_per_node):
    try:
        doc = json.loads(text)
    except ValueError as error:
        raise Violation("not valid JSON: %s" % error)
    p = parse(doc, ranks_per_node)
    if p.collective in ("broadcast", "reduce") and not 0 <= root < p.n:
        raise Violation("a %s needs --root in [0, %d)" % (p.collective, p.n))
    check_nops(p, p.inplace)
    run = Run(p)
    run.run()
    layout = "in-place" if p.inplace else "out-of-place"
    for rank in range(p.n):
        for index in range(p.gpus[rank]["output_chunks"]):
            want = expected_output(p, rank, index, root)
            if want is not None and run.output(rank, index) != want:
                raise Violation("%s call: gpu %d output chunk %d holds %s, expected %s (contributions rank:chunk)"
                                % (layout, rank, index, describe(run.output(rank, index)), describe(want)))
    return p


def check_file(path, root, ranks_per_node):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        check_text(text, root, ranks_per_node)
    except Violation as violation:
        print("%s: error: %s" % (path, violation))
        return False
    return True


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="*")
    parser.add_argument("--root", type=int, default=0, help="the root of a broadcast or reduce")
    parser.add_argument("--ranks-per-node", type=int, default=0, help="0: every rank on one node")
    parser.add_argument("--manifest", help="a file of lines 'FILE ROOT [RANKS_PER_NODE]'")
    args = parser.parse_args(argv)
    jobs = [(f, args.root, args.ranks_per_node) for f in args.files]
    try:
        if args.manifest:
            base = os.path.dirname(args.manifest)
            with open(args.manifest, encoding="utf-8") as f:
                for line in f:
                    fields = line.split()
                    if fields:
                        jobs.append((os.path.join(base, fields[0]), int(fields[1]),
                                     int(fields[2]) if len(fields) > 2 else 0))
        if not jobs:
            parser.error("no files")
        failed = [job[0] for job in jobs if not check_file(*job)]
    except (OSError, ValueError, IndexError) as error:
        print("error: %s" % error)
        return 2
    print("%d of %d files pass" % (len(jobs) - len(failed), len(jobs)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
