// The MSCCL XML front end on the hand-written corpus (tests/data/msccl): every valid file imports
// and is proved by the semantic checker; every defective one fails at the expected file:line:col.
#include "lang/msccl_xml.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "lang/load_algorithm.h"
#include "lang/semantic_check.h"

namespace tuccl {
namespace {

std::string corpusPath(const std::string& name) { return std::string(TUCCL_SOURCE_DIR) + "/tests/data/msccl/" + name; }

Expected<ImportedMscclAlgorithm> importCorpus(const std::string& name) { return importMscclXmlFile(corpusPath(name)); }

struct ValidFile {
  const char* name;
  Collective collective;
  int32_t nRanks;
  bool inPlace;
  int32_t root;
};

const ValidFile kValidFiles[] = {
    {"ring_allreduce_1ch.xml", Collective::AllReduce, 4, true, -1},
    {"ring_allreduce_2ch.xml", Collective::AllReduce, 4, true, -1},
    {"ring_allreduce_rrs.xml", Collective::AllReduce, 4, true, -1},
    {"allgather_inplace.xml", Collective::AllGather, 4, true, -1},
    {"allgather_outofplace.xml", Collective::AllGather, 4, false, -1},
    {"allgather_inferred.xml", Collective::AllGather, 4, false, -1},
    {"reduce_scatter_outofplace.xml", Collective::ReduceScatter, 4, false, -1},
    {"reducescatter_inplace.xml", Collective::ReduceScatter, 4, true, -1},
    {"alltoall_copy.xml", Collective::AllToAll, 4, false, -1},
    {"broadcast_chain.xml", Collective::Broadcast, 4, false, 2},
    {"reduce_chain.xml", Collective::Reduce, 4, true, 0},
    {"local_tb_and_nops.xml", Collective::AllReduce, 2, false, -1},
    {"unusual_attributes.xml", Collective::AllGather, 3, true, -1},
    {"ring_allreduce_io_views.xml", Collective::AllReduce, 3, true, -1},
    {"allgather_inplace_selfcopy.xml", Collective::AllGather, 3, true, -1},
    {"allgather_chan_minus_one.xml", Collective::AllGather, 3, false, -1},
    {"send_then_reuse.xml", Collective::AllReduce, 2, true, -1},
};

TEST(MscclXml, EveryValidCorpusFileImportsAndIsProved) {
  for (const ValidFile& file : kValidFiles) {
    SCOPED_TRACE(file.name);
    Expected<ImportedMscclAlgorithm> imported = importCorpus(file.name);
    ASSERT_TRUE(imported.ok()) << imported.status().toString();
    const Algorithm& algorithm = imported->algorithm;
    EXPECT_EQ(algorithm.collective, file.collective);
    EXPECT_EQ(algorithm.nRanks, file.nRanks);
    EXPECT_EQ(algorithm.inPlace, file.inPlace);
    EXPECT_EQ(algorithm.root, file.root);
    EXPECT_FALSE(algorithm.ops.empty());
    for (const Operation& op : algorithm.ops) EXPECT_TRUE(op.loc.known());
    CheckReport report = checkAlgorithm(algorithm);
    EXPECT_TRUE(report.ok()) << (report.ok() ? "" : violationName(report.violation->kind)) << ": "
                             << (report.ok() ? "" : report.violation->message) << " at line "
                             << (report.ok() ? 0 : report.violation->loc.line);
  }
}

// ---- Defective files: the first problem, at file:line:col ----------------------------------------

struct DefectiveFile {
  const char* name;
  const char* where;  ///< "line:col"
  const char* message;  ///< a part of the message
  bool atImport;        ///< refused by the importer (else by the semantic checker)
  ViolationKind kind = ViolationKind::Structure;
};

const DefectiveFile kDefectiveFiles[] = {
    {"bad_inplace.xml", "2:108", "attribute inplace=\"2\" of <algo> is out of range [0, 1]", true},
    {"bad_ngpus.xml", "2:81", "attribute ngpus=\"four\" of <algo> is not an integer", true},
    {"bad_srcbuf.xml", "23:28", "srcbuf=\"x\" of <step> is not a buffer", true},
    {"coll_custom.xml", "2:91", "coll=\"custom\" is not supported", true},
    {"coll_not_inferable.xml", "2:1", "no coll attribute and the buffers do not tell the collective", true},
    {"dependency_cycle.xml", "8:7", "dependency cycle: rank 0 <tb id=\"0\"> step 2 (line 8) -> rank 0 <tb id=\"1\"> step 0",
     true},
    {"mismatched_cnt.xml", "38:74", "differs from cnt=\"1\" of the send it pairs with (rank 1 <tb id=\"0\"> step 0 (line 21))",
     true},
    {"offset_out_of_range.xml", "23:39", "srcoff=\"4\" with cnt=\"1\" is out of range", true},
    {"send_count_mismatch.xml", "20:5", "sends 6 times on rank 1 -> rank 2 on channel 0, but rank 2 <tb id=\"0\"> (line 36) receives 5 times",
     true},
    {"step_numbering.xml", "42:13", "steps must be numbered 0, 1, 2 ... in order (expected s=\"5\")", true},
    {"step_type_ra.xml", "57:19", "step type \"ra\" (residual add) is not supported", true},
    {"step_type_unknown.xml", "57:19", "unknown step type=\"send\"", true},
    {"two_tbs_one_connection.xml", "15:5", "both send on rank 1 -> rank 2 on channel 0", true},
    {"chan_minus_one_with_peers.xml", "17:34",
     "chan=\"-1\" names no channel, but this <tb> sends to rank 2 and receives from rank 0", true},
    {"reduce_mixed_chunks.xml", "22:7", "reduces chunk 0 into rank 1 input chunk 1, which holds chunk 1", false,
     ViolationKind::MixedChunks},
    {"double_count.xml", "16:7", "rank 0's contribution to chunk 2 would be counted twice on rank 0", false,
     ViolationKind::DoubleCount},
    {"unwritten_read.xml", "33:7", "reads rank 2 scratch chunk 0, which holds no data", false,
     ViolationKind::UnwrittenRead},
};

std::string position(SourceLoc loc) { return std::to_string(loc.line) + ":" + std::to_string(loc.column); }

TEST(MscclXml, EveryDefectiveCorpusFileFailsAtItsLine) {
  for (const DefectiveFile& file : kDefectiveFiles) {
    SCOPED_TRACE(file.name);
    Expected<ImportedMscclAlgorithm> imported = importCorpus(std::string("bad/") + file.name);
    if (file.atImport) {
      ASSERT_FALSE(imported.ok());
      EXPECT_EQ(position(imported.diagnostic().loc), file.where) << imported.status().toString();
      EXPECT_NE(imported.status().message().find(file.message), std::string::npos) << imported.status().toString();
      EXPECT_NE(imported.diagnostic().file.find(file.name), std::string::npos);
      const bool unsupported =
          std::string(file.name) == "coll_custom.xml" || std::string(file.name) == "step_type_ra.xml";
      EXPECT_EQ(imported.status().code(), unsupported ? ErrorCode::Unsupported : ErrorCode::InvalidInput);
      continue;
    }
    ASSERT_TRUE(imported.ok()) << imported.status().toString();
    CheckReport report = checkAlgorithm(imported->algorithm);
    ASSERT_FALSE(report.ok());
    EXPECT_EQ(report.violation->kind, file.kind) << report.violation->message;
    EXPECT_EQ(position(report.violation->loc), file.where);
    EXPECT_NE(report.violation->message.find(file.message), std::string::npos) << report.violation->message;
  }
}

// How the runtimes read what TuCCL used to refuse: in place, an rrcs from the input view into the
// output view of the same chunk is one reduce (RCCL's bundled ring files); a cpy onto the same
// memory moves nothing (SCCL's in-place AllGather); chan="-1" on a tb without peers is no channel
// (SCCL's older dialect), said once as a warning.
TEST(MscclXml, AliasedViewsAndSccltDialectReadAsTheRuntimesDo) {
  Expected<ImportedMscclAlgorithm> ring = importCorpus("ring_allreduce_io_views.xml");
  ASSERT_TRUE(ring.ok()) << ring.status().toString();
  EXPECT_TRUE(ring->warnings.empty());
  int32_t reduces = 0, copies = 0;
  for (const Operation& op : ring->algorithm.ops) (op.kind == OpKind::Reduce ? reduces : copies) += 1;
  // Per rank: rrs (a copy into scratch and a local reduce), rrcs (one reduce into the aliased
  // slot), rcs and r (copies), and what the first s sends arrives by the peer's rrs.
  EXPECT_EQ(reduces, 3 * 2);
  EXPECT_EQ(copies, 3 * 3);
  Expected<ImportedMscclAlgorithm> selfCopy = importCorpus("allgather_inplace_selfcopy.xml");
  ASSERT_TRUE(selfCopy.ok()) << selfCopy.status().toString();
  for (const Operation& op : selfCopy->algorithm.ops) EXPECT_FALSE(op.isLocal()) << "the self-copy moves nothing";
  Expected<ImportedMscclAlgorithm> sccl = importCorpus("allgather_chan_minus_one.xml");
  ASSERT_TRUE(sccl.ok()) << sccl.status().toString();
  ASSERT_EQ(sccl->warnings.size(), 1u);
  EXPECT_EQ(position(sccl->warnings[0].loc), "5:36");
  EXPECT_NE(sccl->warnings[0].message.find("read as channel 0"), std::string::npos);
  for (const auto& tbs : sccl->schedule.ranks)
    for (const MscclThreadBlock& tb : tbs) EXPECT_EQ(tb.channel, 0);
}

// MSCCL captures what a step sends at the send: a slot another tb rewrites after the send (by a
// dependency) but before the peer's receive in the file's order is copied into scratch at the send,
// and the receive reads the copy; a send whose slot nothing rewrites early gets none.
TEST(MscclXml, ASentSlotRewrittenBeforeItsReceiveIsCapturedAtTheSend) {
  Expected<ImportedMscclAlgorithm> imported = importCorpus("send_then_reuse.xml");
  ASSERT_TRUE(imported.ok()) << imported.status().toString();
  const Algorithm& algorithm = imported->algorithm;
  EXPECT_TRUE(checkAlgorithm(algorithm).ok());
  int32_t snapshots = 0;
  for (const Operation& op : algorithm.ops) {
    if (!op.isLocal() || op.dstBuffer != BufferKind::Scratch || op.dstIndex < 1) continue;
    ++snapshots;  // scratch chunk 0 is the file's own; the snapshot comes after it
    EXPECT_EQ(op.srcBuffer, BufferKind::Scratch);
    EXPECT_EQ(op.srcIndex, 0);
    EXPECT_EQ(op.dstIndex, 2) << "the same index modulo the chunk unit (2): chunks of one length";
  }
  EXPECT_EQ(snapshots, 2) << "one per rank: the first send of tb 1";
  EXPECT_EQ(algorithm.bufferChunks[static_cast<int>(BufferKind::Scratch)], 3);
  // The as-written schedule keeps the snapshot in the sending step.
  const MscclThreadBlock& sender = imported->schedule.ranks[0][1];
  ASSERT_EQ(sender.steps.size(), 2u);
  EXPECT_EQ(sender.steps[0].nOps, 2) << "the snapshot and the transfer";
  EXPECT_EQ(sender.steps[1].nOps, 1) << "the second send's slot is not rewritten early";
  // The ring files send slots their own tb overwrites later: no snapshot there.
  Expected<ImportedMscclAlgorithm> ring = importCorpus("ring_allreduce_rrs.xml");
  ASSERT_TRUE(ring.ok());
  for (const auto& tbs : ring->schedule.ranks)
    for (const MscclThreadBlock& tb : tbs)
      for (const MscclScheduleStep& step : tb.steps) EXPECT_LE(step.nOps, 3);
}

// ---- Inline variations: every other error path -----------------------------------------------------

// A 2-rank exchange AllReduce (in place): each rank sends its copy of the peer's chunk, reduces the
// peer's copy of its own chunk on receipt, sends it back; `algo` and `gpu1` replace the parts.
std::string exchangeAllReduce(const std::string& algo = R"(<algo ngpus="2" nchunksperloop="2" nchannels="1" coll="allreduce" inplace="1">)",
                     const std::string& gpu1Tb = R"(<tb id="0" send="0" recv="0" chan="0">)",
                     const std::string& extra = "") {
  std::string text = algo + "\n";
  for (int r = 0; r < 2; ++r) {
    const int p = 1 - r;
    text += "<gpu id=\"" + std::to_string(r) + "\" i_chunks=\"2\" o_chunks=\"2\" s_chunks=\"0\">\n";
    text += r == 1 ? gpu1Tb + "\n" : R"(<tb id="0" send="1" recv="1" chan="0">)" "\n";
    text += "<step s=\"0\" type=\"s\" srcbuf=\"i\" srcoff=\"" + std::to_string(p) +
            "\" dstbuf=\"i\" dstoff=\"-1\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n";
    text += "<step s=\"1\" type=\"rrc\" srcbuf=\"i\" srcoff=\"" + std::to_string(r) + "\" dstbuf=\"i\" dstoff=\"" +
            std::to_string(r) + "\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n";
    text += "<step s=\"2\" type=\"s\" srcbuf=\"i\" srcoff=\"" + std::to_string(r) +
            "\" dstbuf=\"i\" dstoff=\"-1\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n";
    text += "<step s=\"3\" type=\"r\" srcbuf=\"i\" srcoff=\"-1\" dstbuf=\"i\" dstoff=\"" + std::to_string(p) +
            "\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n</tb>\n";
    if (r == 1) text += extra;
    text += "</gpu>\n";
  }
  return text + "</algo>\n";
}

Status importError(const std::string& text) {
  Expected<ImportedMscclAlgorithm> imported = importMscclXml("inline.xml", text);
  if (imported.ok()) return Status();
  return imported.status();
}

TEST(MscclXml, TheExchangeBaseImportsAndIsProved) {
  Expected<ImportedMscclAlgorithm> imported = importMscclXml("inline.xml", exchangeAllReduce());
  ASSERT_TRUE(imported.ok()) << imported.status().toString();
  EXPECT_TRUE(checkAlgorithm(imported->algorithm).ok());
  // The exchange's send and receive overlap (both ranks send before they receive): the
  // happens-before order is asynchronous, not a rendezvous.
  EXPECT_EQ(imported->algorithm.ops.size(), 4u);
  EXPECT_EQ(imported->algorithm.name, "inline");
  EXPECT_EQ(imported->algorithm.nChannels, 1);
}

TEST(MscclXml, EveryAttributeErrorNamesItsPlace) {
  struct Case {
    std::string text;
    const char* message;
  };
  const std::string algo2 = R"(<algo ngpus="2" nchunksperloop="2" nchannels="1" coll="allreduce" inplace="1">)";
  const std::vector<Case> cases = {
      {"", "expected an <algo> element; the file has none"},
      {"<!-- only a comment -->", "expected an <algo> element"},
      {"<system version=\"1\"/>", "expected <algo> as the root element, found <system>"},
      {"<algo ngpus=\"2\"", "malformed XML"},
      {R"(<algo nchunksperloop="2"/>)", "<algo> lacks the required attribute 'ngpus'"},
      {R"(<algo ngpus="0" nchunksperloop="2"/>)", "ngpus=\"0\" of <algo> is out of range [1, 65536]"},
      {R"(<algo ngpus="99999999999999999999" nchunksperloop="2"/>)", "is out of range"},
      {R"(<algo ngpus="2" nchunksperloop="2" coll="allreduce"/>)", "no <gpu id=\"0\">"},
      {exchangeAllReduce(R"(<algo ngpus="2" nchunksperloop="2" coll="gather">)"), "coll=\"gather\" is not supported"},
      {exchangeAllReduce(R"(<algo ngpus="2" nchunksperloop="2" coll="allsum">)"), "unknown collective coll=\"allsum\""},
      {exchangeAllReduce(R"(<algo ngpus="2" nchunksperloop="2" coll="allreduce" proto="LL256">)"),
       "proto=\"LL256\" of <algo> is not Simple, LL or LL128"},
      {exchangeAllReduce(R"(<algo ngpus="2" nchunksperloop="3" coll="allgather">)"),
       "nchunksperloop=\"3\" is not a multiple of ngpus=\"2\""},
      {exchangeAllReduce(R"(<algo ngpus="2" nchunksperloop="2" coll="allgather">)"), "i_chunks=\"2\" of <gpu id=\"0\"> exceeds"},
      {exchangeAllReduce(R"(<algo ngpus="2" nchunksperloop="2" coll="allreduce" root="1">)"),
       "root applies only to broadcast and reduce"},
      {exchangeAllReduce(algo2, R"(<tb id="1" send="0" recv="0" chan="0">)"), "ids must be 0 .. 0 without gaps"},
      {exchangeAllReduce(algo2, R"(<tb id="0" send="1" recv="0" chan="0">)"), "sends to its own rank"},
      {exchangeAllReduce(algo2, R"(<tb id="0" send="0" recv="1" chan="0">)"), "receives from its own rank"},
      {exchangeAllReduce(algo2, R"(<tb id="0" send="0" recv="0" chan="1">)"), "chan=\"1\" of <tb> is out of range [0, 0]"},
      {exchangeAllReduce(algo2, R"(<tb id="0" send="-1" recv="0" chan="0">)"), "sends, but its rank 1 <tb id=\"0\"> has send=\"-1\""},
      {exchangeAllReduce(algo2, R"(<tb id="0" send="0" recv="-1" chan="0">)"),
       "receives, but its rank 1 <tb id=\"0\"> has recv=\"-1\""},
      {exchangeAllReduce(algo2, R"(<tb id="0" send="0" recv="0" chan="0">)",
                R"(<tb id="0" send="-1" recv="-1" chan="0"><step s="0" type="nop" depid="-1" deps="-1"/></tb>)"),
       "a second <tb id=\"0\"> on rank 1"},
      {exchangeAllReduce(algo2, R"(<tb id="0" send="0" recv="0" chan="0">)",
                R"(<tb id="1" send="-1" recv="-1" chan="0"><step s="0" type="nop" depid="5" deps="0"/></tb>)"),
       "depid=\"5\" names no <tb> of rank 1"},
      {exchangeAllReduce(algo2, R"(<tb id="0" send="0" recv="0" chan="0">)",
                R"(<tb id="1" send="-1" recv="-1" chan="0"><step s="0" type="nop" depid="0" deps="4"/></tb>)"),
       "deps=\"4\" names no step of rank 1 <tb id=\"0\"> (it has 4 steps)"},
      {exchangeAllReduce(algo2, R"(<tb id="0" send="0" recv="0" chan="0">)",
                R"(<tb id="1" send="0" recv="-1" chan="1"><step s="0" type="s" srcbuf="i" srcoff="0" cnt="1"/></tb>)"),
       "chan=\"1\" of <tb> is out of range"},
      {exchangeAllReduce(R"(<algo ngpus="2" nchunksperloop="2" coll="allreduce" inplace="1">)", R"(<tb id="0" send="0" recv="0" chan="0">)",
                R"(<tb id="1" send="0" recv="-1" chan="1"><step s="0" type="s" srcbuf="i" srcoff="0" cnt="1"/></tb>)"),
       "sends on rank 1 -> rank 0 on channel 1, but rank 0 has no <tb> with recv=\"1\" chan=\"1\""},
      {exchangeAllReduce(R"(<algo ngpus="2" nchunksperloop="2" coll="allreduce" inplace="1">)", R"(<tb id="0" send="0" recv="0" chan="0">)",
                R"(<tb id="1" send="-1" recv="0" chan="1"><step s="0" type="r" dstbuf="i" dstoff="0" cnt="1"/></tb>)"),
       "receives on rank 0 -> rank 1 on channel 1, but rank 0 has no <tb> with send=\"1\" chan=\"1\""},
      {exchangeAllReduce(algo2, R"(<tb id="0" send="0" recv="0" chan="0">)",
                R"(<tb id="1" send="-1" recv="-1" chan="0"><step s="0" type="cpy" srcbuf="i" srcoff="0" dstbuf="i" cnt="1"/></tb>)"),
       "<step> lacks the required attribute 'dstoff'"},
      {exchangeAllReduce(algo2, R"(<tb id="0" send="0" recv="0" chan="0">)",
                R"(<tb id="1" send="-1" recv="-1" chan="0"><step s="0" type="cpy" srcoff="0" dstbuf="i" dstoff="1" cnt="1"/></tb>)"),
       "<step> lacks the required attribute 'srcbuf'"},
      {exchangeAllReduce(algo2, R"(<tb id="0" send="0" recv="0" chan="0">)",
                R"(<tb id="1" send="-1" recv="-1" chan="0"><step s="0" srcbuf="i" srcoff="0" dstbuf="i" dstoff="1" cnt="1"/></tb>)"),
       "<step> lacks the required attribute 'type'"},
      {exchangeAllReduce(algo2, R"(<tb id="0" send="0" recv="0" chan="0">)",
                R"(<tb id="1" send="-1" recv="-1" chan="0"><step s="0" type="re" srcbuf="i" srcoff="0" dstbuf="i" dstoff="1" cnt="1" hasdep="2"/></tb>)"),
       "hasdep=\"2\" of <step> is out of range [0, 1]"},
      {R"(<algo ngpus="2" nchunksperloop="2" coll="allgather"><gpu id="0" i_chunks="1" o_chunks="2"><copy i_off="1" o_off="0"/></gpu><gpu id="1" i_chunks="1" o_chunks="2"/></algo>)",
       "i_off=\"1\" (cnt 1) is out of range: the input has 1 chunks"},
      {R"(<algo ngpus="2" nchunksperloop="2" coll="allgather"><gpu id="0" i_chunks="1" o_chunks="2"><copy i_off="0" o_off="2"/></gpu><gpu id="1" i_chunks="1" o_chunks="2"/></algo>)",
       "o_off=\"2\" (cnt 1) is out of range: the output has 2 chunks"},
      {R"(<algo ngpus="2" nchunksperloop="2" coll="allgather"><gpu id="0" i_chunks="1" o_chunks="2"/><gpu id="0" i_chunks="1" o_chunks="2"/></algo>)",
       "a second <gpu id=\"0\">"},
      {R"(<algo ngpus="2" nchunksperloop="2" coll="broadcast"><gpu id="0" i_chunks="2" o_chunks="2"/><gpu id="1" i_chunks="2" o_chunks="2"/></algo>)",
       "cannot infer the Broadcast root: ranks {0, 1} receive nothing; add root=\"R\" to <algo>"},
  };
  for (const Case& test : cases) {
    SCOPED_TRACE(test.text.substr(0, 200));
    Status status = importError(test.text);
    ASSERT_FALSE(status.ok());
    EXPECT_NE(status.message().find(test.message), std::string::npos) << status.toString();
    EXPECT_EQ(status.diagnostic().file, "inline.xml");
    if (!test.text.empty()) {
      EXPECT_TRUE(status.diagnostic().loc.known()) << status.toString();
    }
  }
}

TEST(MscclXml, RootsComeFromTheAttributeOrTheDataFlow) {
  // Reduce: every rank sends, so the root must be given.
  const std::string everyoneSends =
      R"(<algo ngpus="2" nchunksperloop="1" coll="reduce" inplace="1">
<gpu id="0" i_chunks="1" o_chunks="1" s_chunks="1"><tb id="0" send="1" recv="1" chan="0">
<step s="0" type="s" srcbuf="i" srcoff="0" cnt="1"/><step s="1" type="r" dstbuf="s" dstoff="0" cnt="1"/></tb></gpu>
<gpu id="1" i_chunks="1" o_chunks="1" s_chunks="1"><tb id="0" send="0" recv="0" chan="0">
<step s="0" type="rrc" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1"/><step s="1" type="s" srcbuf="i" srcoff="0" cnt="1"/></tb></gpu>
</algo>)";
  Status status = importError(everyoneSends);
  EXPECT_NE(status.message().find("cannot infer the Reduce root: every rank sends"), std::string::npos)
      << status.toString();
  std::string withRoot = everyoneSends;
  withRoot.replace(withRoot.find("inplace"), 0, "root=\"1\" ");
  Expected<ImportedMscclAlgorithm> imported = importMscclXml("inline.xml", withRoot);
  ASSERT_TRUE(imported.ok()) << imported.status().toString();
  EXPECT_EQ(imported->algorithm.root, 1);
  EXPECT_TRUE(checkAlgorithm(imported->algorithm).ok());
}

TEST(MscclXml, TheScheduleKeepsTheFilesThreadBlocksAndTheirOperations) {
  Expected<ImportedMscclAlgorithm> imported = importCorpus("local_tb_and_nops.xml");
  ASSERT_TRUE(imported.ok()) << imported.status().toString();
  const MscclSchedule& schedule = imported->schedule;
  const Algorithm& algorithm = imported->algorithm;
  ASSERT_EQ(schedule.ranks.size(), 2u);
  ASSERT_EQ(schedule.ranks[0].size(), 2u);
  const MscclThreadBlock& local = schedule.ranks[0][0];
  EXPECT_EQ(local.sendPeer, -1);
  EXPECT_EQ(local.recvPeer, -1);
  ASSERT_EQ(local.steps.size(), 3u);
  EXPECT_EQ(local.steps[1].type, MscclStepType::Nop);
  EXPECT_EQ(local.steps[1].nOps, 0);
  ASSERT_EQ(local.steps[2].nOps, 1);
  EXPECT_EQ(algorithm.ops[local.steps[2].ops[0]].kind, OpKind::Reduce);
  const MscclThreadBlock& peer = schedule.ranks[0][1];
  EXPECT_EQ(peer.sendPeer, 1);
  // Rank 0's first send is the operation rank 1's first receive performs.
  ASSERT_EQ(peer.steps[0].nOps, 1);
  const Operation& sent = algorithm.ops[peer.steps[0].ops[0]];
  EXPECT_EQ(sent.srcRank, 0);
  EXPECT_EQ(sent.dstRank, 1);
  EXPECT_EQ(schedule.ranks[1][1].steps[1].ops[0], peer.steps[0].ops[0]);
  EXPECT_EQ(sent.loc, schedule.ranks[1][1].steps[1].loc);
  // Dependencies order the IR: the reduce waits for the receive, the second send for the reduce.
  const Operation& received = algorithm.ops[peer.steps[1].ops[0]];
  const Operation& reduced = algorithm.ops[local.steps[2].ops[0]];
  const Operation& resent = algorithm.ops[peer.steps[3].ops[0]];
  EXPECT_LT(received.step, reduced.step);
  EXPECT_LT(reduced.step, resent.step);
  EXPECT_EQ(imported->protocol, Protocol::Simple);
  EXPECT_TRUE(imported->outOfPlace);
}

TEST(MscclXml, RrsReducesIntoFreshScratchAndCopiesPrecedeTheSchedule) {
  Expected<ImportedMscclAlgorithm> rrs = importCorpus("ring_allreduce_rrs.xml");
  ASSERT_TRUE(rrs.ok()) << rrs.status().toString();
  // Two rrs steps per rank, one chunk each: two scratch chunks beyond s_chunks="0".
  EXPECT_EQ(rrs->algorithm.chunks(BufferKind::Scratch), 2);
  Expected<ImportedMscclAlgorithm> a2a = importCorpus("alltoall_copy.xml");
  ASSERT_TRUE(a2a.ok()) << a2a.status().toString();
  ASSERT_EQ(a2a->schedule.preCopyOps.size(), 4u);
  for (int32_t op : a2a->schedule.preCopyOps) EXPECT_EQ(a2a->algorithm.ops[op].step, 0);
  for (const Operation& op : a2a->algorithm.ops) {
    if (!op.isLocal()) {
      EXPECT_GT(op.step, 0);
    }
  }
  EXPECT_EQ(a2a->redop, "nop");
  Expected<ImportedMscclAlgorithm> odd = importCorpus("unusual_attributes.xml");
  ASSERT_TRUE(odd.ok()) << odd.status().toString();
  EXPECT_EQ(odd->algorithm.name, "odd order");
  EXPECT_EQ(odd->protocol, Protocol::LL);
  EXPECT_EQ(odd->nThreads, 256);
  EXPECT_EQ(odd->maxBytes, 0);
  EXPECT_TRUE(odd->outOfPlace);
}

TEST(MscclXml, AnInPlaceCopyOntoItsOwnAliasIsDropped) {
  const std::string text =
      R"(<algo ngpus="1" nchunksperloop="1" coll="allgather" inplace="1"><gpu id="0" i_chunks="0" o_chunks="1"><copy i_off="0" o_off="0"/></gpu></algo>)";
  Expected<ImportedMscclAlgorithm> imported = importMscclXml("inline.xml", text);
  ASSERT_TRUE(imported.ok()) << imported.status().toString();
  EXPECT_TRUE(imported->algorithm.ops.empty());
  EXPECT_TRUE(checkAlgorithm(imported->algorithm).ok());
}

TEST(MscclXml, TheChunkWorkLimitRefusesHugeFiles) {
  MscclImportOptions options;
  options.maxChunkWork = 3;
  Expected<ImportedMscclAlgorithm> imported = importMscclXml("inline.xml", exchangeAllReduce(), options);
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(imported.status().code(), ErrorCode::ResourceExhausted);
  EXPECT_NE(imported.status().message().find("too large to import"), std::string::npos);
}

TEST(MscclXml, MissingFilesAreIoErrors) {
  Expected<ImportedMscclAlgorithm> imported = importMscclXmlFile(corpusPath("no_such_file.xml"));
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(imported.status().code(), ErrorCode::IoError);
}

TEST(LoadAlgorithm, FormatComesFromTheNameOrTheFirstCharacter) {
  EXPECT_EQ(detectAlgorithmFormat("a.xml", "anything"), AlgorithmFormat::MscclXml);
  EXPECT_EQ(detectAlgorithmFormat("a.XML", ""), AlgorithmFormat::MscclXml);
  EXPECT_EQ(detectAlgorithmFormat("a.txt", "\xEF\xBB\xBF  \n<algo/>"), AlgorithmFormat::MscclXml);
  EXPECT_EQ(detectAlgorithmFormat("a.resccl", "AllReduce(nRanks=4)"), AlgorithmFormat::Resccl);
  EXPECT_EQ(detectAlgorithmFormat("x", ""), AlgorithmFormat::Resccl);
  EXPECT_EQ(algorithmFormatName(AlgorithmFormat::MscclXml), "MSCCL XML");
}

TEST(LoadAlgorithm, LoadsBothFormatsAndRefusesParametersForXml) {
  Expected<LoadedAlgorithm> xml = loadAlgorithmFile(corpusPath("ring_allreduce_1ch.xml"));
  ASSERT_TRUE(xml.ok()) << xml.status().toString();
  EXPECT_EQ(xml->format, AlgorithmFormat::MscclXml);
  ASSERT_TRUE(xml->msccl.has_value());
  EXPECT_EQ(xml->msccl->schedule.ranks.size(), 4u);
  EXPECT_EQ(xml->algorithm.nRanks, 4);
  EXPECT_TRUE(checkAlgorithm(xml->algorithm).ok());
  RescclOptions options;
  options.parameterOverrides = {{"nRanks", 8}};
  Expected<LoadedAlgorithm> refused = loadAlgorithmFile(corpusPath("ring_allreduce_1ch.xml"), options);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::InvalidArgument);
  EXPECT_NE(refused.status().message().find("parameters apply to ResCCLang programs only"), std::string::npos);
  Expected<LoadedAlgorithm> resccl =
      loadAlgorithmFile(std::string(TUCCL_SOURCE_DIR) + "/examples/algorithms/ring_allreduce.resccl", options);
  ASSERT_TRUE(resccl.ok()) << resccl.status().toString();
  EXPECT_EQ(resccl->format, AlgorithmFormat::Resccl);
  EXPECT_EQ(resccl->algorithm.nRanks, 8);
  EXPECT_FALSE(resccl->msccl.has_value());
  Expected<LoadedAlgorithm> missing = loadAlgorithmFile(corpusPath("missing.xml"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::IoError);
  Expected<LoadedAlgorithm> broken = loadAlgorithmFile(corpusPath("bad/bad_ngpus.xml"));
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.diagnostic().loc.line, 2u);
}

// ---- A 512-rank ring AllGather of tens of MB ---------------------------------------------------------

std::string ringAllGather(int32_t n) {
  std::string text;
  text.reserve(static_cast<size_t>(n) * static_cast<size_t>(n) * 130);
  text += "<algo name=\"ring\" proto=\"Simple\" nchannels=\"1\" nchunksperloop=\"" + std::to_string(n) +
          "\" ngpus=\"" + std::to_string(n) + "\" coll=\"allgather\" inplace=\"1\">\n";
  auto step = [&text](int32_t s, const char* type, const char* srcbuf, int32_t srcoff, int32_t dstoff) {
    text += "      <step s=\"" + std::to_string(s) + "\" type=\"" + type + "\" srcbuf=\"" + srcbuf + "\" srcoff=\"" +
            std::to_string(srcoff) + "\" dstbuf=\"o\" dstoff=\"" + std::to_string(dstoff) +
            "\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n";
  };
  for (int32_t r = 0; r < n; ++r) {
    text += "  <gpu id=\"" + std::to_string(r) + "\" i_chunks=\"0\" o_chunks=\"" + std::to_string(n) +
            "\" s_chunks=\"0\">\n    <tb id=\"0\" send=\"" + std::to_string((r + 1) % n) + "\" recv=\"" +
            std::to_string((r + n - 1) % n) + "\" chan=\"0\">\n";
    step(0, "s", "o", r, -1);
    for (int32_t j = 1; j < n - 1; ++j) step(j, "rcs", "o", -1, (r - j + n) % n);
    step(n - 1, "r", "o", -1, (r + 1) % n);
    text += "    </tb>\n  </gpu>\n";
  }
  return text + "</algo>\n";
}

TEST(MscclXml, A512RankFileOfTensOfMegabytesImports) {
  const std::string text = ringAllGather(512);
  const std::string path = std::string(TUCCL_BINARY_DIR) + "/ring_allgather_512.xml";
  std::ofstream(path) << text;
  std::printf("generated %s: %.1f MB\n", path.c_str(), static_cast<double>(text.size()) / 1e6);
  const auto start = std::chrono::steady_clock::now();
  Expected<ImportedMscclAlgorithm> imported = importMscclXmlFile(path);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(imported.ok()) << imported.status().toString();
  std::printf("imported in %.2f s: %zu operations, %d steps\n", seconds, imported->algorithm.ops.size(),
              imported->algorithm.maxStep() + 1);
  EXPECT_GT(text.size(), 10u * 1000 * 1000);
  EXPECT_EQ(imported->algorithm.ops.size(), 512u * 511u);
  EXPECT_EQ(imported->algorithm.maxStep(), 510);
  EXPECT_TRUE(checkAlgorithm(imported->algorithm).ok());
}

}  // namespace
}  // namespace tuccl
