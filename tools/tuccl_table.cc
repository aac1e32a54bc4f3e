// tuccl-table: inspect and convert TuCCL tuning tables (docs/tuning-table.md).
//
//   tuccl-table validate FILE
//   tuccl-table convert FILE [--to json|csv] [-o OUT] [--lossy]
//   tuccl-table explain FILE --coll allreduce --bytes 1M --nodes 2 --ranks 16 [--topology SIG]
//                            [--pipe-ops N] [--reg-buff 0|1]
//   tuccl-table env FILE --nodes 2 --ranks 16 [--topology SIG] [--export]
//
// FILE may be a JSON table or NCCL's example tuner CSV (detected from the content).
#include <CLI/CLI.hpp>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "support/text_values.h"
#include "table/table_index.h"
#include "table/table_io.h"
#include "cli/cli.h"

namespace {

using namespace tuccl;

/// Once per run, on stderr: the lines the reader skipped and what it read with a caveat, each with
/// its line quoted, then how many.
void printNotes(const std::string& path, const TableNotes& notes) {
  if (notes.empty()) return;
  auto print = [](const std::vector<Diagnostic>& kept, size_t count, const char* label, const char* more) {
    for (const Diagnostic& note : kept) {
      Diagnostic shown = note;
      shown.severity = Severity::Warning;
      shown.message = label + shown.message;
      tuccl::cli::printDiagnostic(shown);
    }
    if (count > kept.size()) std::cerr << "... and " << count - kept.size() << more << "\n";
  };
  print(notes.skipped, notes.skippedLines, "line skipped: ", " more lines skipped");
  print(notes.warnings, notes.warningCount, "", " more warnings");
  std::cerr << path << ": " << notes.skippedLines << (notes.skippedLines == 1 ? " line" : " lines")
            << " skipped, " << notes.warningCount << (notes.warningCount == 1 ? " warning" : " warnings")
            << (notes.skippedLines > 0 ? "; the table is used without the skipped lines" : "")
            << "\n";
}

std::optional<LoadedTable> load(const std::string& path) {
  Expected<LoadedTable> loaded = loadTableFile(path);
  if (!loaded) {
    tuccl::cli::printDiagnostic(loaded.diagnostic());
    return std::nullopt;
  }
  printNotes(path, loaded->notes);
  return std::move(loaded).value();
}

/// "allreduce": the collective as the table files spell it.
std::string tableName(Collective collective) { return toLowerCase(collectiveName(collective)); }

const char* formatName(const LoadedTable& loaded) {
  return loaded.format == TableFormat::Json ? "json v1" : "NCCL tuner csv";
}

std::string originName(const LoadedTable& loaded, uint32_t origin) {
  return loaded.format == TableFormat::Csv ? "line " + std::to_string(origin)
                                           : "entries[" + std::to_string(origin) + "]";
}

std::string describeKey(const TableEntry& entry) {
  std::string key =
      tableName(entry.collective) + " [" + std::to_string(entry.minBytes) + ", " +
      (entry.maxBytes == UINT64_MAX ? std::string("inf") : std::to_string(entry.maxBytes)) + "] B";
  key += ", nNodes " + (entry.nNodes < 0 ? std::string("any") : std::to_string(entry.nNodes));
  key += ", nRanks " + (entry.nRanks < 0 ? std::string("any") : std::to_string(entry.nRanks));
  if (!entry.topology.empty()) key += ", topology " + entry.topology;
  if (entry.numPipeOps >= 0) key += ", numPipeOps " + std::to_string(entry.numPipeOps);
  if (entry.regBuff >= 0) key += ", regBuff " + std::to_string(entry.regBuff);
  return key;
}

std::string describeDecision(const TableEntry& entry) {
  std::string text;
  if (entry.choices.empty()) {
    text = "algorithm/protocol: NCCL's choice";
  } else {
    for (size_t i = 0; i < entry.choices.size(); ++i) {
      char choice[48];
      formatChoice(entry.choices[i], choice, sizeof choice);
      text += (i == 0 ? "" : ", else ") + std::string(choice);
    }
    text += " (the first NCCL marks available; none: NCCL's choice)";
  }
  text += "\n  nChannels: " + (entry.nChannels > 0 ? std::to_string(entry.nChannels) : std::string("NCCL's"));
  text += "\n  chunk size (v6): " +
          (entry.chunkSize > 0 ? std::to_string(entry.chunkSize) + " B" : std::string("NCCL's"));
  if (!entry.tucclAlgorithm.empty()) text += "\n  libtuccl algorithm: " + entry.tucclAlgorithm;
  return text;
}

/// "812.4 us [790.1, 834.7] (9 samples)": a profiled time with what it rests on.
std::string describeTime(double timeUs, const TimeInterval& interval) {
  if (timeUs < 0) return "not measured";
  char text[128];
  int n = std::snprintf(text, sizeof text, "%.1f us", timeUs);
  if (interval.lowUs >= 0 && interval.highUs >= 0 && n > 0)
    n += std::snprintf(text + n, sizeof text - static_cast<size_t>(n), " [%.1f, %.1f]", interval.lowUs, interval.highUs);
  if (interval.samples > 0 && n > 0)
    std::snprintf(text + n, sizeof text - static_cast<size_t>(n), " (%d samples)", interval.samples);
  return text;
}

/// One group's settings in a line: "tree/ll128, 16 channels, chunk 65536 B, libtuccl direct".
std::string describeGroup(const ConfigGroup& g) {
  char choice[48];
  formatChoice(g.choice, choice, sizeof choice);
  std::string text = g.choice.algorithm || g.choice.protocol ? std::string(choice) : std::string();
  auto add = [&](const std::string& part) { text += (text.empty() ? "" : ", ") + part; };
  if (g.nChannels > 0) add(std::to_string(g.nChannels) + " channels");
  if (g.chunkSize > 0) add("chunk " + std::to_string(g.chunkSize) + " B");
  if (!g.tucclAlgorithm.empty()) add("libtuccl " + g.tucclAlgorithm);
  return text.empty() ? "the defaults (nothing set)" : text;
}

/// The evidence tuccl-tune left: the entry's time and interval, its comparison with the defaults,
/// and every group's time, fastest first as measured.
std::string describeEvidence(const TableEntry& entry) {
  std::string text = "evidence:\n  " + std::string(entry.isDefault ? "the defaults (a default entry)" : "this decision") +
                     ": " + describeTime(entry.timeUs, entry.interval);
  if (entry.versusDefault) {
    const DefaultComparison& c = *entry.versusDefault;
    char line[256];
    if (c.low >= 0 && c.high >= 0)
      std::snprintf(line, sizeof line, "%.3f [%.3f, %.3f] over %d interleaved pairs, %d won", c.ratio, c.low, c.high,
                    c.pairs, c.won);
    else
      std::snprintf(line, sizeof line, "%.3f (no interval) over %d pairs, %d won", c.ratio, c.pairs, c.won);
    if (entry.isDefault) {
      text += "\n  the best rival, " + (c.versus.empty() ? std::string("-") : c.versus) + ", against the defaults: " +
              line + (c.high >= 0 && c.low > 1 ? " (significantly slower)" : " (no significant difference)");
    } else {
      text += "\n  against the defaults: time ratio " + std::string(line) +
              (c.high >= 0 && c.high < 1 ? " (significantly faster)" : " (not significant)");
    }
  } else if (entry.timeUs >= 0) {
    text += "\n  against the defaults: not measured";
  }
  for (size_t i = 0; i < entry.groups.size(); ++i)
    text += "\n  group " + std::to_string(i + 1) + ": " + describeGroup(entry.groups[i]) + ": " +
            describeTime(entry.groups[i].timeUs, entry.groups[i].interval);
  return text;
}

/// Per entry, the TuCCL program it was tuned on when NCCL does not run that program (tuccl-tune's
/// metadata.tuccl.entries[i].ncclRuns false, by JSON entry index): NCCL gets the entry's protocol
/// and channel count for its own algorithm, measured on another program. Empty: NCCL runs it.
std::vector<std::string> programsNcclDoesNotRun(const LookupTable& table) {
  std::vector<std::string> programs(table.entries.size());
  if (table.metadataJson.empty()) return programs;
  const nlohmann::json metadata = nlohmann::json::parse(table.metadataJson, nullptr, false);
  if (!metadata.is_object() || !metadata.contains("tuccl") || !metadata["tuccl"].is_object()) return programs;
  const nlohmann::json& entries = metadata["tuccl"].value("entries", nlohmann::json::array());
  if (!entries.is_array()) return programs;
  for (size_t i = 0; i < table.entries.size(); ++i) {
    const uint32_t origin = table.entries[i].origin;
    if (origin >= entries.size() || !entries[origin].is_object()) continue;
    const nlohmann::json& e = entries[origin];
    const auto runs = e.find("ncclRuns");
    if (runs == e.end() || !runs->is_boolean() || runs->get<bool>() || !table.entries[i].tucclAlgorithm.empty()) continue;
    const auto program = e.find("program");
    programs[i] = program != e.end() && program->is_string() && !program->get<std::string>().empty()
                      ? program->get<std::string>()
                      : std::string("a TuCCL program");
  }
  return programs;
}

constexpr const char* kNotNcclsProgram =
    "NCCL does not run such a program: the NCCL tuner plugin serves NCCL only the protocol and channel count, "
    "which NCCL applies to its own ring or tree though they were measured on the program (libtuccl runs the "
    "program itself)";

int validate(const std::string& path) {
  auto loaded = load(path);
  if (!loaded) return tuccl::cli::kExitError;
  const LookupTable& table = loaded->table;
  std::printf(
      "%s: valid: %s, hash %s, %zu entries, %zu environment recommendations, %zu constant overrides\n",
      path.c_str(), formatName(*loaded), formatHash(loaded->hash).c_str(), table.entries.size(),
      table.environment.size(), table.constants.size());
  if (!loaded->notes.empty()) {
    std::printf("  %zu %s skipped, %zu %s (listed on stderr)\n", loaded->notes.skippedLines,
                loaded->notes.skippedLines == 1 ? "line" : "lines", loaded->notes.warningCount,
                loaded->notes.warningCount == 1 ? "warning" : "warnings");
  }
  std::array<size_t, kTunerCollectives> perCollective{};
  for (const TableEntry& entry : table.entries) ++perCollective[static_cast<size_t>(entry.collective)];
  for (int c = 0; c < kTunerCollectives; ++c) {
    if (perCollective[c] > 0) {
      std::printf("  %-14s %zu entries\n", tableName(static_cast<Collective>(c)).c_str(),
                  perCollective[c]);
    }
  }
  std::printf("  match order: %s\n",
              table.matchOrder == MatchOrder::FileOrder ? "file (first match wins)" : "specific-first");
  const std::vector<std::string> programs = programsNcclDoesNotRun(table);
  std::string listed;
  size_t count = 0;
  for (size_t i = 0; i < programs.size(); ++i) {
    if (programs[i].empty()) continue;
    ++count;
    listed += (listed.empty() ? "" : ", ") + originName(*loaded, table.entries[i].origin) + " (" + programs[i] + ")";
  }
  if (count > 0) {
    std::printf("  warning: %zu of %zu entries were tuned on TuCCL programs, %s; %s\n", count, programs.size(),
                listed.c_str(), kNotNcclsProgram);
  }
  return 0;
}

int convert(const std::string& path, std::string to, const std::string& output, bool lossy, bool force) {
  // The output is checked before the table is read: a refusal comes before any work.
  if (const tuccl::Status free = tuccl::cli::checkOutputFree(output, force); !free)
    return tuccl::cli::reportError("tuccl-table", free);
  auto loaded = load(path);
  if (!loaded) return tuccl::cli::kExitError;
  if (to.empty()) to = loaded->format == TableFormat::Json ? "csv" : "json";
  std::string text;
  if (to == "json") {
    text = writeTableJson(loaded->table);
  } else {
    Expected<CsvTable> csv = writeTableCsv(loaded->table, lossy);
    if (!csv) {
      std::cerr << path << ": error: " << csv.status().message() << "\n";
      return tuccl::cli::kExitError;
    }
    for (const std::string& loss : csv->dropped) std::cerr << path << ": warning: dropped " << loss << "\n";
    text = std::move(csv->text);
  }
  if (output.empty() || output == "-") {
    std::cout << text;
    return 0;
  }
  if (const tuccl::Status written = tuccl::cli::writeOutput(output, text); !written)
    return tuccl::cli::reportError("tuccl-table", written);
  return 0;
}

int explain(const std::string& path, const std::string& collText, const std::string& bytesText,
            const CommKey& comm, int pipeOps, int regBuff) {
  auto loaded = load(path);
  if (!loaded) return tuccl::cli::kExitError;
  auto collective = parseCollective(collText);
  if (!collective || !isTunerCollective(*collective)) {
    std::cerr << "error: unknown collective '" << collText
              << "' (broadcast, reduce, allgather, reducescatter, allreduce)\n";
    return tuccl::cli::kExitError;
  }
  Expected<uint64_t> bytes = parseByteSize(bytesText);
  if (!bytes) {
    std::cerr << "error: " << bytes.status().message() << "\n";
    return tuccl::cli::kExitError;
  }
  std::printf("table: %s (%s, hash %s, %zu entries)\n", path.c_str(), formatName(*loaded),
              formatHash(loaded->hash).c_str(), loaded->table.entries.size());
  std::printf("query: %s %llu B, nNodes %d, nRanks %d, topology %s, numPipeOps %s, regBuff %s\n",
              tableName(*collective).c_str(), static_cast<unsigned long long>(*bytes),
              comm.nNodes, comm.nRanks, comm.topology.empty() ? "-" : comm.topology.c_str(),
              pipeOps < 0 ? "unknown" : std::to_string(pipeOps).c_str(),
              regBuff < 0 ? "unknown" : std::to_string(regBuff).c_str());
  CommIndex index = CommIndex::build(loaded->table, comm);
  const CompiledDecision* decision = index.lookup(static_cast<int>(*collective), *bytes, pipeOps, regBuff);
  // Every entry whose key covers the query, in match order, to show what the winner shadows.
  std::vector<uint32_t> covering;
  for (uint32_t i : entriesInMatchOrder(loaded->table)) {
    const TableEntry& entry = loaded->table.entries[i];
    if (entry.collective == *collective && entry.minBytes <= *bytes && *bytes <= entry.maxBytes &&
        keyMatches(entry.nNodes, entry.nRanks, entry.topology, comm)) {
      covering.push_back(i);
    }
  }
  if (decision == nullptr) {
    std::printf("match: none; the tuner leaves NCCL's choice, nChannels and chunk size alone\n");
    for (uint32_t i : covering) {
      std::printf("  (%s covers the size but filters on numPipeOps/regBuff: %s)\n",
                  originName(*loaded, loaded->table.entries[i].origin).c_str(),
                  describeKey(loaded->table.entries[i]).c_str());
    }
    return 0;
  }
  const TableEntry& entry = loaded->table.entries[decision->entryIndex];
  std::printf("match: %s: %s\n", originName(*loaded, entry.origin).c_str(), describeKey(entry).c_str());
  std::printf("decides:\n  %s\n", entry.isDefault ? "nothing: the defaults (tuning found nothing significantly faster)"
                                                   : describeDecision(entry).c_str());
  if (entry.timeUs >= 0 || entry.versusDefault || !entry.groups.empty())
    std::printf("%s\n", describeEvidence(entry).c_str());
  if (const std::string program = programsNcclDoesNotRun(loaded->table)[decision->entryIndex]; !program.empty())
    std::printf("  warning: tuned on %s; %s\n", program.c_str(), kNotNcclsProgram);
  for (uint32_t i : covering) {
    if (i == decision->entryIndex) continue;
    const TableEntry& other = loaded->table.entries[i];
    bool filtered = (other.numPipeOps >= 0 && other.numPipeOps != pipeOps) ||
                    (other.regBuff >= 0 && other.regBuff != regBuff);
    std::printf("  (%s: %s: %s)\n",
                filtered ? "skipped, its numPipeOps/regBuff filter does not match"
                         : "also covers it, lower in match order",
                originName(*loaded, other.origin).c_str(), describeKey(other).c_str());
  }
  return 0;
}

int env(const std::string& path, const CommKey& comm, bool exportLines) {
  auto loaded = load(path);
  if (!loaded) return tuccl::cli::kExitError;
  const EnvRecommendation* recommendation = recommendEnvironment(loaded->table, comm);
  if (recommendation == nullptr) {
    std::printf("# %s: no environment recommendation for %d ranks on %d nodes\n", path.c_str(), comm.nRanks,
                comm.nNodes);
    return 0;
  }
  std::printf("# %s: environment[%u], for %d ranks on %d nodes (settings a tuner cannot change)\n",
              path.c_str(), recommendation->origin, comm.nRanks, comm.nNodes);
  for (const auto& [name, value] : recommendation->settings) {
    std::printf("%s%s=%s\n", exportLines ? "export " : "", name.c_str(), value.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tuccl-table: validate, convert and explain TuCCL tuning tables (JSON or NCCL tuner CSV)"};
  app.require_subcommand(1);

  std::string path;
  std::string to;
  std::string output;
  bool lossy = false;
  std::string coll;
  std::string bytes;
  CommKey comm;
  int pipeOps = -1;
  int regBuff = -1;
  bool exportLines = false;

  CLI::App* validateCmd = app.add_subcommand("validate", "check a table and summarise it");
  validateCmd->add_option("file", path, "table file (JSON or CSV)")->required();

  CLI::App* convertCmd = app.add_subcommand("convert", "convert CSV to JSON or JSON to CSV");
  convertCmd->add_option("file", path, "table file (JSON or CSV)")->required();
  convertCmd->add_option("--to", to, "output format (default: the other one)")
      ->check(tuccl::cli::oneOf({"json", "csv"}));
  convertCmd->add_option("-o,--output", output, "output file (default: stdout)");
  bool force = false;
  tuccl::cli::addForceFlag(*convertCmd, force);
  convertCmd->add_flag("--lossy", lossy, "drop what CSV cannot hold instead of failing");

  CLI::App* explainCmd = app.add_subcommand("explain", "which entry matches a call and what it decides");
  explainCmd->add_option("file", path, "table file (JSON or CSV)")->required();
  explainCmd->add_option("--coll", coll, "broadcast, reduce, allgather, reducescatter, allreduce")
      ->required();
  explainCmd->add_option("--bytes", bytes, "message size (e.g. 1048576, 64K, 1M)")->required();
  explainCmd->add_option("--nodes", comm.nNodes, "nNodes of the communicator")
      ->required()
      ->check(CLI::PositiveNumber);
  explainCmd->add_option("--ranks", comm.nRanks, "nRanks of the communicator")
      ->required()
      ->check(CLI::PositiveNumber);
  explainCmd->add_option("--topology", comm.topology, "topology signature (TUCCL_TOPOLOGY_SIGNATURE)");
  explainCmd->add_option("--pipe-ops", pipeOps, "numPipeOps of the call (default: unknown)");
  explainCmd->add_option("--reg-buff", regBuff, "regBuff of the call, 0 or 1 (default: unknown)");

  CLI::App* envCmd =
      app.add_subcommand("env", "recommended NCCL_* environment lines for a communicator size");
  envCmd->add_option("file", path, "table file (JSON or CSV)")->required();
  envCmd->add_option("--nodes", comm.nNodes, "nNodes")->required()->check(CLI::PositiveNumber);
  envCmd->add_option("--ranks", comm.nRanks, "nRanks")->required()->check(CLI::PositiveNumber);
  envCmd->add_option("--topology", comm.topology, "topology signature");
  envCmd->add_flag("--export", exportLines, "prefix each line with 'export '");

  if (auto status = tuccl::cli::parse(app, argc, argv)) return *status;
  try {
    if (*validateCmd) return validate(path);
    if (*convertCmd) return convert(path, to, output, lossy, force);
    if (*explainCmd) return explain(path, coll, bytes, comm, pipeOps, regBuff);
    if (*envCmd) return env(path, comm, exportLines);
  } catch (const std::exception& e) {
    std::cerr << "tuccl-table: error: " << e.what() << "\n";
    return tuccl::cli::kExitError;
  }
  return 0;
}
