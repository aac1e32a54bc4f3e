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

}  // namespace
}  // namespace tuccl
