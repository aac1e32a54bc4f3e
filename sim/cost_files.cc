#include "sim/cost_files.h"

#include <algorithm>
#include <filesystem>
#include <limits>

#include "support/source_text.h"

namespace tuccl {

// sim/cost/<class>.json, embedded by sim/CMakeLists.txt.
extern const char kCostModel_volta[];
extern const char kCostModel_ampere[];
extern const char kCostModel_hopper[];
extern const char kCostModel_blackwell[];

namespace {

struct ClassFile {
  const char* name;
  const char* text;
  int32_t minSm;  ///< compute capability × 10 from which the class applies
};

constexpr ClassFile kClassFiles[] = {
    {"volta", kCostModel_volta, 70},
    {"ampere", kCostModel_ampere, 80},
    {"hopper", kCostModel_hopper, 90},
    {"blackwell", kCostModel_blackwell, 100},
};

}  // namespace

const std::vector<std::string>& hardwareClasses() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> list;
    for (const ClassFile& file : kClassFiles) list.emplace_back(file.name);
    return list;
  }();
  return names;
}

std::string hardwareClassOf(const Topology& topology) {
  if (topology.gpus.empty()) return "";
  int32_t sm = std::numeric_limits<int32_t>::max();
  for (const Gpu& gpu : topology.gpus) sm = std::min(sm, gpu.sm);
  std::string found;
  for (const ClassFile& file : kClassFiles)
    if (sm >= file.minSm) found = file.name;
  return found;
}

Expected<CostModel> costModelForClass(std::string_view hardwareClass) {
  for (const ClassFile& file : kClassFiles) {
    if (hardwareClass != file.name) continue;
    return readCostModelJson(SourceText("sim/cost/" + std::string(file.name) + ".json", file.text));
  }
  std::string names;
  for (const std::string& name : hardwareClasses()) names += (names.empty() ? "" : ", ") + name;
  return makeError(ErrorCode::NotFound, "no cost model for the hardware class '" + std::string(hardwareClass) +
                                            "' (classes: " + names + ")");
}

Expected<CostModel> costModelForTopology(const Topology& topology, const std::string& topologyPath) {
  if (!topology.costModel.empty()) {
    std::filesystem::path path(topology.costModel);
    if (path.is_relative()) path = std::filesystem::path(topologyPath).parent_path() / path;
    try {
      return readCostModelJson(readSourceFile(path.string()));
    } catch (const DiagnosticError& error) {
      return makeError(ErrorCode::NotFound, topologyPath + ": its costModel: " + error.what());
    }
  }
  const std::string hardwareClass = hardwareClassOf(topology);
  if (hardwareClass.empty()) return defaultCostModel();
  return costModelForClass(hardwareClass);
}

}  // namespace tuccl
