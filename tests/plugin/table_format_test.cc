// The table file formats: JSON schema v1 and NCCL's example tuner CSV, readers, writers, errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "plugin/lookup_table.h"

namespace tuccl {
namespace {

const std::string kData = std::string(TUCCL_SOURCE_DIR) + "/tests/data/plugin/";

LookupTable parseJson(const std::string& text) {
  TableResult result = readTableJson(text, "t.json");
  EXPECT_TRUE(result.ok()) << formatTableError(result.error);
  return result.ok() ? *result.table : LookupTable{};
}

std::string jsonError(const std::string& text) {
  TableResult result = readTableJson(text, "t.json");
  EXPECT_FALSE(result.ok());
  return formatTableError(result.error);
}

std::string csvError(const std::string& text) {
  TableResult result = readTableCsv(text, "t.conf");
  EXPECT_FALSE(result.ok());
  return formatTableError(result.error);
}

TEST(Names, ParseCaseInsensitiveAndAny) {
  EXPECT_EQ(parseTableCollective("AllReduce"), Collective::AllReduce);
  EXPECT_EQ(parseTableCollective("reducescatter"), Collective::ReduceScatter);
  EXPECT_FALSE(parseTableCollective("alltoall"));
  EXPECT_EQ(parseAlgorithm("NVLS_TREE"), kAlgoNvlsTree);
  EXPECT_EQ(parseAlgorithm("collnet_chain"), kAlgoCollNetChain);
  EXPECT_EQ(parseAlgorithm("any"), kAny);
  EXPECT_EQ(parseAlgorithm("-1"), kAny);
  EXPECT_EQ(parseChoiceProtocol("ll128"), kProtoLL128);
  EXPECT_FALSE(parseChoiceProtocol("ll256"));
  EXPECT_EQ(algorithmName(kAlgoPat), "PAT");
  EXPECT_EQ(choiceProtocolName(kAny), "any");
}

TEST(ByteSize, UnitsAndOverflow) {
  EXPECT_EQ(parseByteSize("1048576"), 1048576u);
  EXPECT_EQ(parseByteSize("1M"), 1048576u);
  EXPECT_EQ(parseByteSize("64k"), 65536u);
  EXPECT_EQ(parseByteSize("2GiB"), 2ull << 30);
  EXPECT_EQ(parseByteSize("512KB"), 512u << 10);
  EXPECT_EQ(parseByteSize("7B"), 7u);
  EXPECT_FALSE(parseByteSize(""));
  EXPECT_FALSE(parseByteSize("-1"));
  EXPECT_FALSE(parseByteSize("1X"));
  EXPECT_FALSE(parseByteSize("99999999999999999999"));
  EXPECT_FALSE(parseByteSize("20000000000T"));
  EXPECT_EQ(formatByteSize(1048576), "1M");
  EXPECT_EQ(formatByteSize(1000), "1000");
}

TEST(Hash, Fnv1a64KnownValues) {
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(formatHash(0xaf63dc4c8601ec8cull), "0xaf63dc4c8601ec8c");
}

TEST(TableJson, ReadsTheValidTestTable) {
  LoadResult loaded = loadTableFile(kData + "valid.json");
  ASSERT_TRUE(loaded.ok()) << formatTableError(loaded.error);
  const LookupTable& table = loaded.loaded->table;
  EXPECT_EQ(loaded.loaded->format, TableFormat::Json);
  EXPECT_EQ(table.matchOrder, MatchOrder::SpecificFirst);
  ASSERT_EQ(table.entries.size(), 9u);
  const TableEntry& e1 = table.entries[1];
  EXPECT_EQ(e1.collective, Collective::AllReduce);
  EXPECT_EQ(e1.minBytes, 65537u);
  EXPECT_EQ(e1.maxBytes, 4u << 20);
  EXPECT_EQ(e1.nNodes, 2);
  EXPECT_EQ(e1.nRanks, 16);
  ASSERT_EQ(e1.choices.size(), 3u);
  EXPECT_EQ(e1.choices[0], (Choice{kAlgoRing, kProtoLL128}));
  EXPECT_EQ(e1.choices[1], (Choice{kAlgoTree, kProtoLL128}));
  EXPECT_EQ(e1.choices[2], (Choice{kAny, kProtoSimple}));
  EXPECT_EQ(e1.nChannels, 16);
  EXPECT_EQ(e1.chunkSize, 512u << 10);
  EXPECT_EQ(table.entries[2].maxBytes, UINT64_MAX);
  EXPECT_EQ(table.entries[5].choices, (std::vector<Choice>{{kAny, kProtoLL128}}));
  EXPECT_TRUE(table.entries[7].choices.empty());
  EXPECT_EQ(table.entries[7].nChannels, 8);
  EXPECT_EQ(table.entries[6].topology, "dgx-h100");
  ASSERT_EQ(table.environment.size(), 2u);
  EXPECT_EQ(table.environment[0].settings, (std::vector<std::pair<std::string, std::string>>{
                                               {"NCCL_NTHREADS", "512"}, {"NCCL_BUFFSIZE", "8388608"}}));
  ASSERT_EQ(table.constants.size(), 3u);
  EXPECT_EQ(table.constants[0].name, "baseLatencies.RING.LL");
  EXPECT_EQ(table.constants[0].offset, 1u * 3 + 0);
  EXPECT_DOUBLE_EQ(table.constants[0].value, 6.6);
}

TEST(TableJson, WriteReadRoundTrip) {
  LoadResult loaded = loadTableFile(kData + "valid.json");
  ASSERT_TRUE(loaded.ok());
  std::string text = writeTableJson(loaded.loaded->table);
  LookupTable again = parseJson(text);
  // origin is the JSON index, which the round trip keeps.
  EXPECT_EQ(again, loaded.loaded->table);
  EXPECT_EQ(writeTableJson(again), text) << "the writer is deterministic";
}

TEST(TableJson, ErrorsNameThePlace) {
  EXPECT_EQ(
      jsonError("{\"version\": 1, \"entries\": [{\"collective\": \"allreduce\", \"protocol\": \"ll256\"}]}"),
      "t.json: entries[0].protocol: unknown protocol \"ll256\" (expected ll, ll128, simple or any)");
  EXPECT_EQ(jsonError("{\"version\": 2}"),
            "t.json: version: unsupported table version 2 (this plugin reads version 1)");
  EXPECT_EQ(jsonError("{\"entries\": []}"), "t.json: missing \"version\" (this plugin reads version 1)");
  EXPECT_EQ(jsonError("{\"version\": 1, \"entries\": [{\"collective\": \"allreduce\", \"nChanels\": 4}]}"),
            "t.json: entries[0].nChanels: unknown key \"nChanels\"");
  EXPECT_EQ(jsonError("{\"version\": 1, \"entries\": [{\"collective\": \"allreduce\", \"nChannels\": 65}]}"),
            "t.json: entries[0].nChannels: 65 is out of range [1, 64]");
  EXPECT_EQ(jsonError("{\"version\": 1, \"entries\": [{\"collective\": \"allreduce\", \"minBytes\": 10, "
                      "\"maxBytes\": 5}]}"),
            "t.json: entries[0]: minBytes 10 is larger than maxBytes 5");
  EXPECT_EQ(jsonError("{\"version\": 1, \"entries\": [{\"collective\": \"allreduce\", \"fallback\": []}]}"),
            "t.json: entries[0].fallback: a fallback list needs an \"algorithm\" or \"protocol\" first");
  EXPECT_EQ(jsonError("{\"version\": 1, \"environment\": [{\"NCCL_NTHREADS\": 100}]}"),
            "t.json: environment[0].NCCL_NTHREADS: 100 is not a multiple of 32");
  EXPECT_EQ(jsonError("{\"version\": 1, \"environment\": [{\"NCCL_NTHREADS\": 1024}]}"),
            "t.json: environment[0].NCCL_NTHREADS: 1024 is out of range [64, 512]");
  EXPECT_NE(jsonError("{\"version\": 1, \"constants\": {\"baseLatencies\": {\"RING\": {\"LL512\": 1}}}}")
                .find("constants.baseLatencies.RING.LL512: not a constant"),
            std::string::npos);
  EXPECT_NE(jsonError("{\"version\": 1, \"constants\": {\"llMaxBws\": {\"HOPPER\": {\"2\": -3}}}}")
                .find("finite, non-negative"),
            std::string::npos);
  EXPECT_NE(jsonError("[]").find("a table is a JSON object"), std::string::npos);
}

TEST(TableJson, SyntaxErrorHasLineAndColumn) {
  TableResult result = readTableJson("{\n  \"version\": 1,\n  \"entries\": [,]\n}\n", "t.json");
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error.line, 3u);
  EXPECT_EQ(result.error.column, 15u);
  EXPECT_NE(result.error.message.find("invalid JSON"), std::string::npos);
}

TEST(TableJson, TooManyFallbacksAndPipeOpsValues) {
  std::string fallbacks;
  for (int i = 0; i < kMaxChoices; ++i) fallbacks += std::string(i ? "," : "") + "{\"protocol\": \"ll\"}";
  EXPECT_NE(jsonError("{\"version\": 1, \"entries\": [{\"collective\": \"allreduce\", \"protocol\": \"ll\", "
                      "\"fallback\": [" +
                      fallbacks + "]}]}")
                .find("at most 7 fallbacks"),
            std::string::npos);
  std::string entries;
  for (int i = 0; i <= kMaxPipeOpsValues; ++i) {
    entries += std::string(i ? "," : "") +
               "{\"collective\": \"allreduce\", \"numPipeOps\": " + std::to_string(i + 1) + "}";
  }
  EXPECT_NE(jsonError("{\"version\": 1, \"entries\": [" + entries + "]}").find("distinct numPipeOps"),
            std::string::npos);
}

TEST(TableJson, ConstantNamesCoverTheStruct) {
  EXPECT_EQ(tunerConstantOffset("baseLatencies.TREE.LL"), 0u);
  EXPECT_EQ(tunerConstantOffset("baseLatencies.PAT.SIMPLE"), 20u);
  EXPECT_EQ(tunerConstantOffset("hwLatencies.NVLINK.TREE.LL"), 21u);
  EXPECT_EQ(tunerConstantOffset("hwLatencies.NET.PAT.SIMPLE"), 83u);
  EXPECT_EQ(tunerConstantOffset("llMaxBws.VOLTA.1"), 84u);
  EXPECT_EQ(tunerConstantOffset("perChMaxNVLSTreeBws.BLACKWELL.4+"), kNumTunerConstants - 1);
  EXPECT_FALSE(tunerConstantOffset("llMaxBws.HOPPER.3"));
  EXPECT_FALSE(tunerConstantOffset("baseLatencies.RING"));
  for (uint32_t offset = 0; offset < kNumTunerConstants; ++offset) {
    EXPECT_EQ(tunerConstantOffset(tunerConstantName(offset)), offset) << tunerConstantName(offset);
  }
}

TEST(TableCsv, ReadsNcclExampleFormat) {
  LoadResult loaded = loadTableFile(kData + "valid.csv");
  ASSERT_TRUE(loaded.ok()) << formatTableError(loaded.error);
  EXPECT_EQ(loaded.loaded->format, TableFormat::Csv);
  const LookupTable& table = loaded.loaded->table;
  EXPECT_EQ(table.matchOrder, MatchOrder::FileOrder);
  ASSERT_EQ(table.entries.size(), 9u);
  const TableEntry& first = table.entries[0];
  EXPECT_EQ(first.origin, 3u) << "CSV entries remember their line";
  EXPECT_EQ(first.nChannels, 2);
  EXPECT_EQ(first.nNodes, 1);
  EXPECT_EQ(first.nRanks, -1);
  const TableEntry& spaced = table.entries[2];
  EXPECT_EQ(spaced.collective, Collective::AllReduce);
  EXPECT_EQ(spaced.choices, (std::vector<Choice>{{kAlgoRing, kProtoLL128}}));
  EXPECT_EQ(spaced.minBytes, 65537u);
  EXPECT_EQ(table.entries[1].nChannels, 0) << "channels -1 keeps NCCL's";
  EXPECT_EQ(table.entries[3].numPipeOps, 1);
  EXPECT_EQ(table.entries[3].regBuff, -1);
  EXPECT_EQ(table.entries[4].regBuff, 1);
  EXPECT_EQ(table.entries[4].maxBytes, 4294967296u);
}

TEST(TableCsv, ErrorsNameLineAndColumn) {
  EXPECT_EQ(csvError("# c\nallreduce,0,10,ring,ll256,-1,-1,-1\n"),
            "t.conf:2:21: unknown protocol 'll256' (expected ll, ll128 or simple)");
  EXPECT_EQ(
      csvError("allreduce,0,10,ring\n"),
      "t.conf:1:1: expected 8 to 10 comma-separated fields (collective,minbytes,maxbytes,algorithm,protocol,"
      "channels,nNodes,nRanks[,numPipeOps[,regBuff]]), got 4");
  EXPECT_EQ(
      csvError("alltoall,0,10,ring,ll,-1,-1,-1\n"),
      "t.conf:1:1: unknown collective 'alltoall' (expected broadcast, reduce, allgather, reducescatter or "
      "allreduce)");
  EXPECT_EQ(csvError("allreduce,0,10,ring,ll,65,-1,-1\n"),
            "t.conf:1:24: channels '65' is not -1 or an integer in [0, 64]");
  EXPECT_EQ(csvError("allreduce,0,10,ring,ll,-1,-1,-1,1,2\n"),
            "t.conf:1:35: regBuff '2' is not -1 or an integer in [0, 1]");
  EXPECT_EQ(csvError("allreduce,20,10,ring,ll,-1,-1,-1\n"), "t.conf:1:11: minbytes is larger than maxbytes");
  EXPECT_EQ(csvError("allreduce,x,10,ring,ll,-1,-1,-1\n"), "t.conf:1:11: minbytes 'x' is not a byte count");
}

TEST(TableCsv, CommentsBlankLinesCrLfAndWildcardExtensions) {
  TableResult result = readTableCsv("\r\n  # comment\r\nallgather,0,-1,-1,ll128,-1,-1,-1\r\n\r\n", "t.conf");
  ASSERT_TRUE(result.ok()) << formatTableError(result.error);
  ASSERT_EQ(result.table->entries.size(), 1u);
  EXPECT_EQ(result.table->entries[0].maxBytes, UINT64_MAX);
  EXPECT_EQ(result.table->entries[0].choices, (std::vector<Choice>{{kAny, kProtoLL128}}));
  EXPECT_EQ(result.table->entries[0].origin, 3u);
}

TEST(TableCsv, CsvJsonCsvRoundTrip) {
  LoadResult loaded = loadTableFile(kData + "valid.csv");
  ASSERT_TRUE(loaded.ok());
  LookupTable fromJson = parseJson(writeTableJson(loaded.loaded->table));
  EXPECT_EQ(fromJson.matchOrder, MatchOrder::FileOrder);
  ASSERT_EQ(fromJson.entries.size(), loaded.loaded->table.entries.size());
  std::string error;
  auto csv = writeTableCsv(fromJson, false, &error);
  ASSERT_TRUE(csv) << error;
  TableResult again = readTableCsv(*csv, "again.conf");
  ASSERT_TRUE(again.ok()) << formatTableError(again.error);
  for (size_t i = 0; i < fromJson.entries.size(); ++i) {
    TableEntry a = fromJson.entries[i];
    TableEntry b = again.table->entries[i];
    a.origin = b.origin = 0;
    EXPECT_EQ(a, b) << "entry " << i;
  }
}

TEST(TableCsv, JsonToCsvRefusesWhatCsvCannotHoldUnlessLossy) {
  LoadResult loaded = loadTableFile(kData + "valid.json");
  ASSERT_TRUE(loaded.ok());
  std::string error;
  EXPECT_FALSE(writeTableCsv(loaded.loaded->table, false, &error));
  EXPECT_NE(error.find("fallback"), std::string::npos);
  EXPECT_NE(error.find("environment"), std::string::npos);
  std::vector<std::string> dropped;
  auto csv = writeTableCsv(loaded.loaded->table, true, &error, &dropped);
  ASSERT_TRUE(csv);
  EXPECT_FALSE(dropped.empty());
  TableResult again = readTableCsv(*csv, "lossy.conf");
  ASSERT_TRUE(again.ok()) << formatTableError(again.error);
  EXPECT_EQ(again.table->entries.size(), 8u) << "the topology entry is dropped, not broadened";
  // Specific-first order is flattened into file order: the wildcard allreduce entry comes after
  // every entry keyed on nNodes / nRanks.
  const auto& entries = again.table->entries;
  size_t wildcard = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].collective == Collective::AllReduce && entries[i].nNodes < 0 && entries[i].nRanks < 0)
      wildcard = i;
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].collective == Collective::AllReduce && entries[i].nNodes >= 0) {
      EXPECT_LT(i, wildcard);
    }
  }
}

TEST(LoadTable, DetectsFormatAndFailsCleanly) {
  EXPECT_TRUE(loadTableFile(kData + "valid.json").ok());
  LoadResult empty = loadTableFile(kData + "empty.json");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error.message, "the table file is empty");
  EXPECT_TRUE(loadTableFile(kData + "empty_entries.json").ok());
  EXPECT_FALSE(loadTableFile(kData + "broken.json").ok());
  EXPECT_FALSE(loadTableFile(kData + "invalid.json").ok());
  EXPECT_FALSE(loadTableFile(kData + "future_version.json").ok());
  EXPECT_FALSE(loadTableFile(kData + "broken.csv").ok());
  LoadResult missing = loadTableFile(kData + "no-such-table.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error.message, "cannot open the table file");
  LoadResult directory = loadTableFile(kData);
  ASSERT_FALSE(directory.ok());
  EXPECT_EQ(directory.error.message, "the table path is a directory");
}

TEST(LoadTable, RefusesFilesOverTheSizeLimit) {
  std::string path = testing::TempDir() + "/tuccl_oversized_" + std::to_string(getpid()) + ".json";
  {
    std::ofstream out(path, std::ios::binary);
    out << "{\"version\": 1, \"entries\": []}";
    std::string padding(1 << 20, ' ');
    for (uint64_t written = 0; written <= kMaxTableFileBytes; written += padding.size()) out << padding;
  }
  LoadResult result = loadTableFile(path);
  std::filesystem::remove(path);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.error.message.find("more than the limit"), std::string::npos);
}

}  // namespace
}  // namespace tuccl

namespace tuccl {
namespace {

TEST(Examples, EveryExampleTableIsValid) {
  int tables = 0;
  for (const auto& file :
       std::filesystem::directory_iterator(std::string(TUCCL_SOURCE_DIR) + "/examples/tables")) {
    LoadResult loaded = loadTableFile(file.path().string());
    EXPECT_TRUE(loaded.ok()) << formatTableError(loaded.error);
    ++tables;
  }
  EXPECT_GE(tables, 2);
}

}  // namespace
}  // namespace tuccl
