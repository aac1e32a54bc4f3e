#!/usr/bin/env python3
"""An independent checker of MSCCL algorithm XML files (Python 3 standard library only).

It reads a file the way the MSCCL runtimes do and then runs it symbolically:

1. lexical rules of the runtimes' hand-written reader: no prolog or DOCTYPE, every start tag on one
   line, attributes separated by exactly one space, values in double quotes, at most 16 attributes,
   names and values of at most 255 characters, no text content, at most 1024 children per element
   and 4096 elements per file;
2. the attributes each runtime requires and their ranges, and the runtime's limits (steps per tb,
   tbs per gpu, cnt < 72, channels < 32, 32 tbs with a send / receive peer per channel), one tb per
   (peer, direction, channel), nop and dependency rules, hasdep on every step waited for;
3. the interpreter's semantics: each tb runs its steps in order; the k-th sending step of a
   (send = B, chan = c) tb pairs with the k-th receiving step of B's (recv = A, chan = c) tb through a
   FIFO of bounded depth (a send waits while it is full); a step with depid/deps waits for that
   step of another tb of its gpu. Chunk contents are multisets of (rank, chunk) contributions, so a
   lost or doubly counted contribution, a read of a chunk never written and a count mismatch between
   paired steps are found; a deadlock names every blocked tb; vector clocks find two tbs of a gpu
   touching one chunk (one writing) without an order between them;
4. the collective's postcondition in every call layout the file allows (in place: MSCCL's aliasing
   of input and output; out of place).

Usage: msccl_semantics.py [--runtime msccl|executor|rccl] [--root R] [--fifo-depth D] FILE...
       msccl_semantics.py --manifest LIST    (lines "FILE RUNTIME ROOT", FILE relative to LIST)
Exit status: 0 when every file passes, 1 when one fails (the first problem per file is printed as
"FILE: error: ..."), 2 for bad usage or an unreadable file.
"""

import argparse
import os
import re
import sys
import xml.etree.ElementTree as ET
from collections import Counter, deque

RUNTIMES = ("msccl", "executor", "rccl")
LIMITS = {"msccl": {"steps": 256, "tbs": 216}, "executor": {"steps": 64, "tbs": 1024}, "rccl": {"steps": 64, "tbs": 1024}}
COLLS = {
    "msccl": {"allreduce", "allgather", "reduce", "broadcast", "alltoall", "reduce_scatter", "custom"},
    "executor": {"reduce", "broadcast", "allreduce", "reducescatter", "allgather", "send", "recv", "gather", "scatter",
                 "alltoall", "alltoallv"},
}
COLLS["rccl"] = COLLS["executor"]
REQUIRED = {
    "algo": {"msccl": ("name", "proto", "nchannels", "nchunksperloop", "ngpus", "coll", "inplace"),
             "executor": ("proto", "nchannels", "nchunksperloop", "ngpus", "coll", "inplace", "outofplace", "minBytes",
                          "maxBytes")},
    "gpu": ("id", "i_chunks", "o_chunks", "s_chunks"),
    "tb": ("id", "send", "recv", "chan"),
    "step": ("s", "type", "srcbuf", "srcoff", "dstbuf", "dstoff", "cnt", "depid", "deps", "hasdep"),
}
MAX_COUNT = 72  # cnt < MSCCL_MAX_COUNT
MAX_CHANNELS = 32
MAX_TBS_PER_CHANNEL = 32
MAX_ATTRIBUTES = 16
MAX_NAME = 255
MAX_CHILDREN = 1024
MAX_ELEMENTS = 4096
# Step types: (needs send peer, needs recv peer, reads src, writes dst, sends, receives)
STEP_TYPES = {
    "s": (True, False, True, False, True, False),
    "r": (False, True, False, True, False, True),
    "rcs": (True, True, False, True, True, True),
    "rrs": (True, True, True, False, True, True),
    "rrc": (False, True, True, True, False, True),
    "rrcs": (True, True, True, True, True, True),
    "cpy": (False, False, True, True, False, False),
    "re": (False, False, True, True, False, False),
    "nop": (False, False, False, False, False, False),
}
ATTRIBUTE = re.compile(r'([A-Za-z_][A-Za-z0-9_.:-]*)="([^"]*)"')
INTEGER = re.compile(r"-?[0-9]+")


class Violation(Exception):
    """The file breaks a rule; the message says which and where."""


# ---- 1. lexical rules ----------------------------------------------------------------------------

def check_lexical(text):
    stripped = text.lstrip()
    if stripped.startswith("<?"):
        raise Violation("line 1: a <?xml ...?> prolog: the runtimes' reader fails on it ('expected >')")
    if stripped.startswith("<!DOCTYPE"):
        raise Violation("line 1: a DOCTYPE: the runtimes' reader fails on it")
    i, elements, stack = 0, 0, []
    while True:
        j = text.find("<", i)
        gap = text[i:] if j < 0 else text[i:j]
        if gap.strip():
            raise Violation("line %d: text content %r: the runtimes' reader does not support it"
                            % (text.count("\n", 0, i) + 1, gap.strip()[:20]))
        if j < 0:
            break
        line = text.count("\n", 0, j) + 1
        if text.startswith("<!--", j):
            end = text.find("-->", j)
            if end < 0:
                raise Violation("line %d: unterminated comment" % line)
            i = end + 3
            continue
        end = text.find(">", j)
        if end < 0:
            raise Violation("line %d: unterminated tag" % line)
        tag = text[j:end + 1]
        i = end + 1
        if tag.startswith("</"):
            if not stack:
                raise Violation("line %d: end tag %s without a start tag" % (line, tag))
            stack.pop()
            continue
        if "\n" in tag or "\r" in tag:
            raise Violation("line %d: a start tag spans several lines: the runtimes' reader needs it on one line" % line)
        body = tag[1:-2] if tag.endswith("/>") else tag[1:-1]
        name, _, rest = body.partition(" ")
        if not name:
            raise Violation("line %d: a tag without a name" % line)
        count = 0
        while rest:
            if rest.startswith(" "):
                raise Violation("line %d: <%s> separates attributes by more than one space (an empty attribute "
                                "that uses up a slot)" % (line, name))
            m = ATTRIBUTE.match(rest)
            if not m:
                raise Violation("line %d: <%s> attribute %r is not name=\"value\"" % (line, name, rest.split(" ")[0]))
            if len(m.group(1)) > MAX_NAME or len(m.group(2)) > MAX_NAME:
                raise Violation("line %d: <%s> attribute %s: name or value longer than %d characters"
                                % (line, name, m.group(1), MAX_NAME))
            count += 1
            rest = rest[m.end():]
            if rest and not rest.startswith(" "):
                raise Violation("line %d: <%s> attributes are not separated by a space" % (line, name))
            rest = rest[1:] if rest else rest
            if not rest and body.endswith(" "):
                raise Violation("line %d: <%s> ends with a space before '>'" % (line, name))
        if count > MAX_ATTRIBUTES:
            raise Violation("line %d: <%s> has %d attributes; the runtimes keep %d and drop the rest"
                            % (line, name, count, MAX_ATTRIBUTES))
        elements += 1
        if stack:
            stack[-1] += 1
            if stack[-1] > MAX_CHILDREN:
                raise Violation("line %d: more than %d children in one element" % (line, MAX_CHILDREN))
        if not tag.endswith("/>"):
            stack.append(0)
    if elements > MAX_ELEMENTS:
        raise Violation("%d elements; the runtimes read at most %d per file" % (elements, MAX_ELEMENTS))


# ---- 2. structure, attributes and limits ---------------------------------------------------------

def attrs_of(element, kind, runtime, where):
    required = REQUIRED[kind]
    if isinstance(required, dict):
        required = required["msccl" if runtime == "msccl" else "executor"]
    for name in required:
        if name not in element.attrib:
            raise Violation("%s: <%s> lacks the attribute %s, which %s requires" % (where, kind, name, runtime))
    return element.attrib


def integer(attrib, name, where, low=None, high=None):
    value = attrib[name]
    if not INTEGER.fullmatch(value):
        raise Violation("%s: %s=%r is not an integer" % (where, name, value))
    number = int(value)
    if (low is not None and number < low) or (high is not None and number > high):
        raise Violation("%s: %s=%d is not in [%s, %s]" % (where, name, number, low, high))
    return number


class Step:
    def __init__(self, attrib, where):
        self.where = where
        self.type = attrib["type"]
        if self.type == "ra":
            raise Violation("%s: type 'ra' has no case in any interpreter" % where)
        if self.type not in STEP_TYPES:
            raise Violation("%s: unknown step type %r" % (where, self.type))
        self.srcbuf, self.dstbuf = attrib["srcbuf"], attrib["dstbuf"]
        for name in ("srcbuf", "dstbuf"):
            if attrib[name] not in ("i", "o", "s"):
                raise Violation("%s: %s=%r is not i, o or s" % (where, name, attrib[name]))
        self.s = integer(attrib, "s", where, 0)
        self.srcoff = integer(attrib, "srcoff", where, -1)
        self.dstoff = integer(attrib, "dstoff", where, -1)
        self.cnt = integer(attrib, "cnt", where, 0, MAX_COUNT - 1)
        self.depid = integer(attrib, "depid", where, -1)
        self.deps = integer(attrib, "deps", where, -1)
        self.hasdep = integer(attrib, "hasdep", where, 0, 1)


class Tb:
    def __init__(self, gpu, attrib, where):
        self.gpu = gpu
        self.where = where
        self.id = integer(attrib, "id", where, 0)
        self.send = integer(attrib, "send", where, -1)
        self.recv = integer(attrib, "recv", where, -1)
        self.chan = integer(attrib, "chan", where, 0, MAX_CHANNELS - 1)
        self.steps = []


class Algorithm:
    pass


def parse_algorithm(root, runtime):
    if root.tag != "algo":
        raise Violation("the root element is <%s>, not <algo>" % root.tag)
    attrib = attrs_of(root, "algo", runtime, "algo")
    a = Algorithm()
    a.proto = attrib["proto"]
    if a.proto not in ("Simple", "LL", "LL128"):
        raise Violation("algo: proto=%r is not Simple, LL or LL128" % a.proto)
    a.coll = attrib["coll"]
    if a.coll not in COLLS[runtime]:
        raise Violation("algo: coll=%r is not one %s reads (%s)" % (a.coll, runtime, ", ".join(sorted(COLLS[runtime]))))
    a.nchannels = integer(attrib, "nchannels", "algo", 1, MAX_CHANNELS)
    a.nchunks = integer(attrib, "nchunksperloop", "algo", 1)
    a.ngpus = integer(attrib, "ngpus", "algo", 1)
    a.inplace = integer(attrib, "inplace", "algo", 0, 1)
    a.outofplace = integer(attrib, "outofplace", "algo", 0, 1) if runtime != "msccl" else 1 - a.inplace
    if runtime != "msccl":
        low = integer(attrib, "minBytes", "algo", 0)
        high = integer(attrib, "maxBytes", "algo", 0)
        if high != 0 and high < low:
            raise Violation("algo: maxBytes %d is below minBytes %d" % (high, low))
        if not a.inplace and not a.outofplace:
            raise Violation("algo: neither inplace nor outofplace: no call can use it")
    a.gpus = {}
    for g in root:
        if g.tag != "gpu":
            continue
        where = "gpu %s" % g.attrib.get("id", "?")
        gattrib = attrs_of(g, "gpu", runtime, where)
        gid = integer(gattrib, "id", where, 0, a.ngpus - 1)
        if gid in a.gpus:
            raise Violation("%s: listed twice" % where)
        chunks = {b: integer(gattrib, b + "_chunks", where, 0) for b in ("i", "o", "s")}
        tbs = []
        for t in g:
            if t.tag != "tb":
                continue
            twhere = "%s tb %s" % (where, t.attrib.get("id", "?"))
            tb = Tb(gid, attrs_of(t, "tb", runtime, twhere), twhere)
            if tb.id != len(tbs):
                raise Violation("%s: tb ids must run 0, 1, 2 ... without gaps (expected %d)" % (twhere, len(tbs)))
            for peer, name in ((tb.send, "send"), (tb.recv, "recv")):
                if peer == gid or peer >= a.ngpus:
                    raise Violation("%s: %s peer %d is the gpu itself or not below ngpus" % (twhere, name, peer))
            if tb.chan >= a.nchannels:
                raise Violation("%s: chan %d is not below nchannels %d" % (twhere, tb.chan, a.nchannels))
            for s in t:
                if s.tag != "step":
                    continue
                swhere = "%s step %s" % (twhere, s.attrib.get("s", "?"))
                step = Step(attrs_of(s, "step", runtime, swhere), swhere)
                if step.s != len(tb.steps):
                    raise Violation("%s: steps must be numbered 0, 1, 2 ... in order (expected %d)" % (swhere, len(tb.steps)))
                tb.steps.append(step)
            tbs.append(tb)
        a.gpus[gid] = (chunks, tbs)
    if sorted(a.gpus) != list(range(a.ngpus)):
        raise Violation("algo: ngpus is %d but the gpus listed are %s" % (a.ngpus, sorted(a.gpus)))
    return a


def check_chunk_counts(a, runtime):
    kind = normal_coll(a.coll)
    for gid, (chunks, _) in a.gpus.items():
        expect_i = a.nchunks // a.ngpus if kind == "allgather" else a.nchunks
        expect_o = a.nchunks // a.ngpus if kind == "reducescatter" else a.nchunks
        if kind in ("allgather", "reducescatter") and a.nchunks % a.ngpus:
            raise Violation("algo: nchunksperloop %d is not a multiple of ngpus %d" % (a.nchunks, a.ngpus))
        if chunks["i"] != expect_i or chunks["o"] != expect_o:
            raise Violation("gpu %d: i_chunks=%d o_chunks=%d, but %s with nchunksperloop %d needs %d and %d"
                            % (gid, chunks["i"], chunks["o"], a.coll, a.nchunks, expect_i, expect_o))


def check_structure(a, runtime):
    limits = LIMITS[runtime]
    for gid, (chunks, tbs) in sorted(a.gpus.items()):
        if len(tbs) > limits["tbs"]:
            raise Violation("gpu %d: %d tbs; %s runs at most %d" % (gid, len(tbs), runtime, limits["tbs"]))
        connections, per_channel = {}, Counter()
        for tb in tbs:
            for peer, direction in ((tb.send, "send"), (tb.recv, "recv")):
                if peer < 0:
                    continue
                key = (direction, peer, tb.chan)
                if key in connections:
                    raise Violation("%s and tb %d both %s %s peer %d on channel %d: one connection, one FIFO"
                                    % (tb.where, connections[key], direction, "to" if direction == "send" else "from",
                                       peer, tb.chan))
                connections[key] = tb.id
                per_channel[(direction, tb.chan)] += 1
                if per_channel[(direction, tb.chan)] > MAX_TBS_PER_CHANNEL:
                    raise Violation("gpu %d channel %d: more than %d tbs with a %s peer"
                                    % (gid, tb.chan, MAX_TBS_PER_CHANNEL, direction))
            if len(tb.steps) > limits["steps"]:
                raise Violation("%s: %d steps; %s runs at most %d per tb" % (tb.where, len(tb.steps), runtime, limits["steps"]))
            pending_nop = False
            for step in tb.steps:
                needs_send, needs_recv, reads, writes, _, _ = STEP_TYPES[step.type]
                if needs_send and tb.send < 0:
                    raise Violation("%s: type %s needs a send peer, the tb has none" % (step.where, step.type))
                if needs_recv and tb.recv < 0:
                    raise Violation("%s: type %s needs a recv peer, the tb has none" % (step.where, step.type))
                for used, buf, off in ((reads, step.srcbuf, step.srcoff), (writes, step.dstbuf, step.dstoff)):
                    if used and (off < 0 or off + step.cnt > chunks[buf]):
                        raise Violation("%s: chunks %s[%d..%d] outside the %d chunks of the buffer"
                                        % (step.where, buf, off, off + step.cnt - 1, chunks[buf]))
                if step.type != "nop" and step.cnt == 0:
                    raise Violation("%s: cnt 0 moves nothing" % step.where)
                if (step.depid < 0) != (step.deps < 0):
                    raise Violation("%s: depid %d and deps %d: both or neither" % (step.where, step.depid, step.deps))
                if step.depid >= 0:
                    if step.depid == tb.id or step.depid >= len(tbs):
                        raise Violation("%s: depid %d is the tb itself or no tb of the gpu" % (step.where, step.depid))
                    target = tbs[step.depid]
                    if step.deps >= len(target.steps):
                        raise Violation("%s: deps %d: tb %d has %d steps" % (step.where, step.deps, target.id, len(target.steps)))
                    if not target.steps[step.deps].hasdep:
                        raise Violation("%s: waits for tb %d step %d, whose hasdep is 0: its flag is never written "
                                        "(hang)" % (step.where, step.depid, step.deps))
                if step.type == "nop":
                    if step.depid < 0:
                        raise Violation("%s: a nop without a dependency" % step.where)
                    pending_nop = True
                else:
                    if pending_nop and step.depid < 0:
                        raise Violation("%s: follows dependency nops but carries no dependency itself" % step.where)
                    pending_nop = False
            if pending_nop:
                raise Violation("%s: ends with dependency nops" % tb.where)


# ---- 3. symbolic execution -----------------------------------------------------------------------

def normal_coll(coll):
    return "reducescatter" if coll == "reduce_scatter" else coll


def storage(a, rank, buf, index, inplace):
    """MSCCL's aliasing of an in-place call (NCCL's layout)."""
    if not inplace or buf == "s":
        return (buf, index)
    kind = normal_coll(a.coll)
    chunks = a.gpus[rank][0]
    if kind == "allgather":
        return ("o", rank * chunks["i"] + index) if buf == "i" else (buf, index)
    if kind == "reducescatter":
        return ("i", rank * chunks["o"] + index) if buf == "o" else (buf, index)
    return ("i", index)


class Run:
    """One call of the algorithm: every gpu's tbs run until all finish or none can move."""

    def __init__(self, a, inplace, fifo_depth):
        self.a, self.inplace, self.depth = a, inplace, fifo_depth
        self.tbs = [tb for gid in sorted(a.gpus) for tb in a.gpus[gid][1]]
        self.index = {(tb.gpu, tb.id): k for k, tb in enumerate(self.tbs)}
        self.pc = [0] * len(self.tbs)
        self.clock = [[0] * len(self.tbs) for _ in self.tbs]
        self.done_clock = [[None] * len(tb.steps) for tb in self.tbs]
        self.fifos = {}
        self.memory = {}    # (rank, storage) -> Counter of contributions
        self.access = {}    # (rank, storage) -> (last write (tb, epoch, where), [reads since])
        for gid, (chunks, _) in a.gpus.items():
            for j in range(chunks["i"]):
                self.memory[(gid, storage(a, gid, "i", j, inplace))] = Counter({(gid, j): 1})

    def fifo(self, src, dst, chan):
        return self.fifos.setdefault((src, dst, chan), deque())

    def slot(self, tb, buf, off):
        return (tb.gpu, storage(self.a, tb.gpu, buf, off, self.inplace))

    def touch(self, k, key, write, where):
        clock = self.clock[k]
        last, reads = self.access.get(key, (None, []))
        earlier = ([last] if last else []) + (reads if write else [])
        for (other, epoch, other_where) in earlier:
            if other != k and clock[other] < epoch:
                raise Violation("%s and %s touch %s[%d] of gpu %d without an order between them (race)"
                                % (where, other_where, key[1][0], key[1][1], key[0]))
        if write:
            self.access[key] = ((k, clock[k], where), [])
        else:
            reads.append((k, clock[k], where))
            self.access[key] = (last, reads)

    def read(self, k, tb, buf, off, cnt, where):
        values = []
        for c in range(cnt):
            key = self.slot(tb, buf, off + c)
            self.touch(k, key, False, where)
            if key not in self.memory:
                raise Violation("%s: reads %s[%d] of gpu %d, which nothing wrote" % (where, key[1][0], key[1][1], key[0]))
            values.append(self.memory[key])
        return values

    def write(self, k, tb, buf, off, values, where):
        for c, value in enumerate(values):
            key = self.slot(tb, buf, off + c)
            self.touch(k, key, True, where)
            self.memory[key] = value

    def ready(self, k):
        tb = self.tbs[k]
        step = tb.steps[self.pc[k]]
        if step.depid >= 0 and self.done_clock[self.index[(tb.gpu, step.depid)]][step.deps] is None:
            return "waits for tb %d step %d" % (step.depid, step.deps)
        _, _, _, _, sends, receives = STEP_TYPES[step.type]
        if receives and not self.fifo(tb.recv, tb.gpu, tb.chan):
            return "waits to receive from gpu %d on channel %d" % (tb.recv, tb.chan)
        if sends and len(self.fifo(tb.gpu, tb.send, tb.chan)) >= self.depth:
            return "waits to send to gpu %d on channel %d (FIFO full)" % (tb.send, tb.chan)
        return None

    def execute(self, k):
        tb = self.tbs[k]
        step = tb.steps[self.pc[k]]
        clock = self.clock[k]
        clock[k] += 1
        if step.depid >= 0:
            other = self.done_clock[self.index[(tb.gpu, step.depid)]][step.deps]
            self.clock[k] = clock = [max(x, y) for x, y in zip(clock, other)]
        _, _, reads, writes, sends, receives = STEP_TYPES[step.type]
        incoming = None
        if receives:
            cnt, incoming, sender_clock, sender_where = self.fifo(tb.recv, tb.gpu, tb.chan).popleft()
            if cnt != step.cnt:
                raise Violation("%s receives cnt %d but its paired send (%s) sends cnt %d" % (step.where, step.cnt,
                                                                                             sender_where, cnt))
            self.clock[k] = clock = [max(x, y) for x, y in zip(clock, sender_clock)]
        local = self.read(k, tb, step.srcbuf, step.srcoff, step.cnt, step.where) if reads else None
        if step.type == "re":
            values = [d + s for d, s in zip(self.read(k, tb, step.dstbuf, step.dstoff, step.cnt, step.where), local)]
        elif incoming is not None and local is not None:
            values = [x + y for x, y in zip(local, incoming)]
        else:
            values = incoming if incoming is not None else local
        if writes:
            self.write(k, tb, step.dstbuf, step.dstoff, values, step.where)
        if sends:
            self.fifo(tb.gpu, tb.send, tb.chan).append((step.cnt, values, list(clock), step.where))
        self.done_clock[k][self.pc[k]] = list(clock)
        self.pc[k] += 1

    def run(self):
        remaining = sum(len(tb.steps) for tb in self.tbs)
        while remaining:
            progress = False
            for k, tb in enumerate(self.tbs):
                while self.pc[k] < len(tb.steps) and self.ready(k) is None:
                    self.execute(k)
                    remaining -= 1
                    progress = True
            if not progress:
                blocked = ["%s step %d %s" % (tb.where, self.pc[k], self.ready(k))
                           for k, tb in enumerate(self.tbs) if self.pc[k] < len(tb.steps)]
                raise Violation("deadlock: " + "; ".join(blocked[:8]) + (" ..." if len(blocked) > 8 else ""))
        for (src, dst, chan), queue in self.fifos.items():
            if queue:
                raise Violation("gpu %d sent %d more step(s) to gpu %d on channel %d than it received (first: %s)"
                                % (src, len(queue), dst, chan, queue[0][3]))

    def output(self, rank, index):
        return self.memory.get((rank, storage(self.a, rank, "o", index, self.inplace)))


def expected_output(a, rank, index, root):
    kind = normal_coll(a.coll)
    n = a.ngpus
    ichunks, ochunks = a.gpus[rank][0]["i"], a.gpus[rank][0]["o"]
    if kind == "allreduce":
        return Counter({(q, index): 1 for q in range(n)})
    if kind == "allgather":
        return Counter({(index // ichunks, index % ichunks): 1})
    if kind == "reducescatter":
        return Counter({(q, rank * ochunks + index): 1 for q in range(n)})
    if kind == "alltoall":
        block = a.nchunks // n
        return Counter({(index // block, rank * block + index % block): 1})
    if kind == "broadcast":
        return Counter({(root, index): 1})
    if kind == "reduce":
        return Counter({(q, index): 1 for q in range(n)}) if rank == root else None
    raise Violation("coll %r has no postcondition this checker knows" % a.coll)


def describe(value):
    if value is None:
        return "nothing (never written)"
    return "{" + ", ".join("%d:%d%s" % (r, c, "" if m == 1 else " x%d" % m) for (r, c), m in sorted(value.items())) + "}"


def check_postcondition(a, run, root, layout):
    for rank in sorted(a.gpus):
        for index in range(a.gpus[rank][0]["o"]):
            want = expected_output(a, rank, index, root)
            if want is None:
                continue
            got = run.output(rank, index)
            if got != want:
                raise Violation("%s call: gpu %d output chunk %d holds %s, expected %s (contributions rank:chunk)"
                                % (layout, rank, index, describe(got), describe(want)))


def check_text(text, runtime, root, fifo_depth):
    check_lexical(text)
    try:
        tree = ET.fromstring(text)
    except ET.ParseError as error:
        raise Violation("not well-formed XML: %s" % error)
    a = parse_algorithm(tree, runtime)
    check_chunk_counts(a, runtime)
    check_structure(a, runtime)
    kind = normal_coll(a.coll)
    if kind in ("broadcast", "reduce") and not 0 <= root < a.ngpus:
        raise Violation("a %s needs --root in [0, %d)" % (a.coll, a.ngpus))
    layouts = [("in-place", True)] if a.inplace else []
    if a.outofplace:
        layouts.append(("out-of-place", False))
    for layout, inplace in layouts:
        run = Run(a, inplace, fifo_depth)
        run.run()
        check_postcondition(a, run, root, layout)
    return a


def check_file(path, runtime, root, fifo_depth):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        check_text(text, runtime, root, fifo_depth)
    except Violation as violation:
        print("%s: error: %s" % (path, violation))
        return False
    return True


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="*")
    parser.add_argument("--runtime", choices=RUNTIMES, default="executor")
    parser.add_argument("--root", type=int, default=0, help="the root of a broadcast or reduce")
    parser.add_argument("--fifo-depth", type=int, default=1, help="steps a connection holds before a send waits")
    parser.add_argument("--manifest", help="a file of lines 'FILE RUNTIME ROOT'")
    args = parser.parse_args(argv)
    jobs = [(f, args.runtime, args.root) for f in args.files]
    try:
        if args.manifest:
            base = os.path.dirname(args.manifest)
            with open(args.manifest, encoding="utf-8") as f:
                for line in f:
                    if line.strip():
                        name, runtime, root = line.split()
                        jobs.append((os.path.join(base, name), runtime, int(root)))
        if not jobs:
            parser.error("no files")
        failed = [job[0] for job in jobs if not check_file(job[0], job[1], job[2], args.fifo_depth)]
    except (OSError, ValueError) as error:
        print("error: %s" % error)
        return 2
    print("%d of %d files pass" % (len(jobs) - len(failed), len(jobs)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
