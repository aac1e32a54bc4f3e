// tuccl-topo: look at a topology, prune it into a sketch, convert it between formats.
//
//   tuccl-topo show   preset:resccl-a100:nodes=2
//   tuccl-topo path   preset:dgx1-v100 0 5
//   tuccl-topo prune  preset:resccl-a100:nodes=4 [--variant pruned|full-mesh|relay] [--format text|taccl]
//   tuccl-topo export topo.xml --nodes 2 --format json|taccl|nccl-xml [-o out]
//   tuccl-run -n 4 --ranks-per-node 2 -- tuccl-topo probe -o probed.json [--report FILE]
//
// A topology is "preset:NAME[:nodes=N,fabric=switch|clos,oversub=R,rack=K]", "local", a TuCCL JSON
// file or an NCCL topology XML file (one node; --nodes composes copies).
#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "support/source_text.h"
#include "topo/load.h"
#include "topo/nccl_xml.h"
#include "topo/paths.h"
#include "topo/presets.h"
#include "topo/sketch.h"
#include "topo/topology_json.h"
#include "cli/cli.h"
#include "tools/topo_probe.h"

namespace {

using namespace tuccl;

struct Common {
  std::string spec;
  LoadOptions options;
};

void addCommon(CLI::App* command, Common& common) {
  command
      ->add_option("topology", common.spec,
                   "preset:NAME[:nodes=N,...], local, a .json (TuCCL) or .xml (NCCL) file")
      ->required();
  tuccl::cli::addClusterOptions(*command, common.options);
  command->add_option("--sysfs-root", common.options.sysfsRoot, "sysfs root for 'local' (tests use a fake tree)");
  tuccl::cli::addGpuFabricOption(*command, common.options.gpuFabric);
}

LoadedTopology load(const Common& common, bool requireGpus = true) {
  Expected<LoadedTopology> result = loadTopology(common.spec, common.options);
  throwIfError(result.status());
  LoadedTopology loaded = std::move(result).value();
  for (const std::string& note : loaded.notes) std::cerr << "note: " << note << "\n";
  if (requireGpus && loaded.topology.empty()) throw std::runtime_error("the topology has no GPUs");
  return loaded;
}

// Set by --force: an existing output file is only replaced when the user asked for it.
bool overwriteOutput = false;

void writeOutput(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    std::cout << text;
    return;
  }
  throwIfError(tuccl::cli::checkOutputFree(path, overwriteOutput));
  throwIfError(tuccl::cli::writeOutput(path, text));
}

std::string sketchText(const Topology& topology, const Sketch& sketch) {
  std::ostringstream out;
  out << "sketch " << sketchVariantName(sketch.variant) << ": " << sketch.nNodes << " node(s), "
      << sketch.interNodePairs.size() << " inter-node connections, " << sketch.intraNodeLinks.size()
      << " intra-node links\n";
  for (size_t g = 0; g < sketch.groups.size(); ++g) {
    out << "group " << g << ":";
    for (int32_t nic : sketch.groups[g]) {
      out << " " << deviceName(topology, nicRef(nic)) << "[ranks";
      for (int32_t r = 0; r < topology.nRanks(); ++r) {
        if (sketch.nicOfRank[r] == nic) out << " " << r;
      }
      out << "]";
    }
    out << "\n";
  }
  for (int32_t r = 0; r < topology.nRanks(); ++r) {
    std::vector<int32_t> peers = sketch.interNodePeersOf(r);
    if (peers.empty()) continue;
    out << "rank " << r << " ->";
    for (int32_t p : peers) out << " " << p;
    out << "\n";
  }
  return out.str();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tuccl-topo: topology summaries, resource paths, sketches and format conversion"};
  app.set_version_flag("--version", "tuccl-topo 0.1.0");
  app.require_subcommand(1);
  app.footer("A TOPOLOGY is preset:NAME[:nodes=N,gpus=K,fabric=switch|clos,oversub=R,rack=K], local, a TuCCL .json\n"
             "or an NCCL/RCCL topology .xml file (one node; --nodes N composes copies).\n"
             "Presets: " + tuccl::cli::joinNames(presetNames()) + "\n"
             "--gpu-fabric nvswitch|hybrid-cube-mesh|pcie states the GPUs' fabric when the file cannot show it.\n");

  Common showArgs;
  CLI::App* show =
      app.add_subcommand("show", "readable summary: nodes, GPUs, NICs and their GPUs, link classes");
  addCommon(show, showArgs);

  Common pathArgs;
  int32_t src = 0;
  int32_t dst = 0;
  CLI::App* path = app.add_subcommand("path", "the resources a transfer from rank SRC to rank DST uses");
  addCommon(path, pathArgs);
  path->add_option("src", src, "source rank")->required();
  path->add_option("dst", dst, "destination rank")->required();

  Common pruneArgs;
  std::string variant = "pruned";
  std::string pruneFormat = "text";
  int32_t chunkup = 1;
  std::string pruneOutput;
  CLI::App* prune = app.add_subcommand("prune", "TuCCL §III-B sketch pruning");
  addCommon(prune, pruneArgs);
  prune->add_option("--variant", variant, "full-mesh, pruned or relay")
      ->check(tuccl::cli::oneOf(tuccl::cli::namesOf(
          {SketchVariant::FullMesh, SketchVariant::Pruned, SketchVariant::Relay}, sketchVariantName)));
  prune->add_option("--format", pruneFormat, "text or taccl")->check(tuccl::cli::oneOf({"text", "taccl"}));
  prune->add_option("--chunkup", chunkup, "TACCL input_chunkup")->check(CLI::PositiveNumber);
  prune->add_option("-o,--output", pruneOutput, "output file (default stdout)");
  tuccl::cli::addForceFlag(*prune, overwriteOutput);

  Common exportArgs;
  std::string exportFormat = "json";
  std::string exportOutput;
  int32_t exportNode = 0;
  CLI::App* exporter =
      app.add_subcommand("export", "write the topology as TuCCL JSON, a TACCL sketch or NCCL XML");
  addCommon(exporter, exportArgs);
  exporter->add_option("--format", exportFormat, "json, taccl or nccl-xml")
      ->check(tuccl::cli::oneOf({"json", "taccl", "nccl-xml"}));
  exporter->add_option("--node", exportNode, "nccl-xml: which node to write");
  exporter->add_option("-o,--output", exportOutput, "output file (default stdout)");
  tuccl::cli::addForceFlag(*exporter, overwriteOutput);

  tuccl::tools::ProbeOptions probeArgs;
  CLI::App* probe = app.add_subcommand(
      "probe", "measure this job's ranks through libtuccl (run as every rank: tuccl-run ... -- tuccl-topo probe) and "
               "write the topology of what was measured, with a report of every pair");
  probe->add_option("-o,--output", probeArgs.output, "the topology JSON rank 0 writes")->required();
  probe->add_option("--report", probeArgs.report, "the report (default: rank 0's standard output)");
  probe->add_option("--latency-iters", probeArgs.latencyIters, "8-byte ping-pongs per pair")->check(CLI::PositiveNumber);
  probe->add_option("--bytes", probeArgs.bandwidthBytes, "the bandwidth message (bytes: 4M, 1MiB, ...)")
      ->transform(tuccl::cli::byteSizeIn(8, uint64_t{1} << 32));
  probe->add_option("--bandwidth-iters", probeArgs.bandwidthIters, "large messages per direction")
      ->check(CLI::PositiveNumber);
  probe->add_option("--slow-fraction", probeArgs.slowFraction,
                    "flag a pair below this fraction of its class's median (and asymmetric directions)")
      ->check(CLI::Range(0.01, 0.99));
  tuccl::cli::addForceFlag(*probe, probeArgs.force);

  // Exit status: 0 success, 2 for any error on the command line or in an input.
  using tuccl::cli::kExitError;
  if (auto status = tuccl::cli::parse(app, argc, argv)) return *status;

  if (*probe) return tuccl::tools::runProbe(probeArgs);
  try {
    // Outputs are checked before the topology is read: a refusal comes before any work.
    throwIfError(tuccl::cli::checkOutputFree(*prune ? pruneOutput : *exporter ? exportOutput : "", overwriteOutput));
    if (*show) {
      LoadedTopology loaded = load(showArgs, false);
      std::cout << describeTopology(loaded.topology);
    } else if (*path) {
      LoadedTopology loaded = load(pathArgs);
      Router router(loaded.topology);
      Path p = router.pathBetween(src, dst);
      std::cout << "rank " << src << " -> rank " << dst << ": " << pathKindName(p.kind) << ", alpha "
                << p.alphaUs << " us, bottleneck " << p.bandwidthGBps << " GB/s\n";
      for (ResourceId id : p.resources) {
        const Resource& r = router.resources()[id];
        std::cout << "  " << r.name << "  (" << linkKindName(r.kind) << ", " << r.bandwidthGBps
                  << " GB/s, alpha " << r.alphaUs << " us)\n";
      }
    } else if (*prune) {
      LoadedTopology loaded = load(pruneArgs);
      Sketch sketch = buildSketch(loaded.topology, *parseSketchVariant(variant));
      if (loaded.topology.nNodes() == 1) {
        std::cerr << "note: the topology has one node, so there are no inter-node connections to prune; compose "
                     "several with --nodes N (for an .xml file or local) or preset:NAME:nodes=N\n";
      }
      if (pruneFormat == "taccl") {
        writeOutput(pruneOutput,
                    tacclSketchJson(loaded.topology, sketch, {chunkup, "uc-min"}).dump(2) + "\n");
      } else {
        writeOutput(pruneOutput, sketchText(loaded.topology, sketch));
      }
    } else if (*exporter) {
      LoadedTopology loaded = load(exportArgs);
      if (exportFormat == "json") {
        writeOutput(exportOutput, writeTopologyJson(loaded.topology));
      } else if (exportFormat == "taccl") {
        Sketch sketch = buildSketch(loaded.topology, SketchVariant::Pruned);
        writeOutput(exportOutput, tacclSketchJson(loaded.topology, sketch).dump(2) + "\n");
      } else {
        if (exportNode < 0 || exportNode >= loaded.topology.nNodes()) {
          throw std::invalid_argument("--node " + std::to_string(exportNode) + " out of range");
        }
        writeOutput(exportOutput, exportNcclXml(loaded.topology, exportNode));
      }
    }
  } catch (const StatusError& error) {
    return tuccl::cli::reportError("tuccl-topo", error.status());
  } catch (const DiagnosticError& error) {
    tuccl::cli::printDiagnostic(error.diagnostic());
    return kExitError;
  } catch (const std::exception& error) {
    std::cerr << "tuccl-topo: error: " << error.what() << "\n";
    return kExitError;
  }
  return 0;
}
