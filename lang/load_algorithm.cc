#include "lang/load_algorithm.h"

#include <utility>
#include <vector>

#include "lang/semantic_check.h"

namespace tuccl {

std::string_view algorithmFormatName(AlgorithmFormat format) {
  return format == AlgorithmFormat::MscclXml ? "MSCCL XML" : "ResCCLang";
}

AlgorithmFormat detectAlgorithmFormat(std::string_view fileName, std::string_view text) {
  constexpr std::string_view kXml = ".xml";
  if (fileName.size() >= kXml.size()) {
    std::string_view ext = fileName.substr(fileName.size() - kXml.size());
    bool xml = true;
    for (size_t i = 0; i < kXml.size(); ++i) xml = xml && (ext[i] | 0x20) == kXml[i];
    if (xml) return AlgorithmFormat::MscclXml;
  }
  text = withoutByteOrderMark(text);
  const size_t first = text.find_first_not_of(" \t\r\n");
  return first != std::string_view::npos && text[first] == '<' ? AlgorithmFormat::MscclXml : AlgorithmFormat::Resccl;
}

Expected<LoadedAlgorithm> loadAlgorithmText(SourceText source, const RescclOptions& options) {
  LoadedAlgorithm loaded;
  loaded.format = detectAlgorithmFormat(source.name(), source.text());
  if (loaded.format == AlgorithmFormat::Resccl) {
    Expected<Algorithm> compiled = compileResccl(source, options);
    if (!compiled.ok()) return compiled.status();
    loaded.algorithm = std::move(compiled).value();
  } else {
    if (!options.parameterOverrides.empty()) {
      return makeError(ErrorCode::InvalidArgument, source.name(), {},
                       "parameter '" + options.parameterOverrides.front().first +
                           "': parameters apply to ResCCLang programs only, and this file is MSCCL XML, whose "
                           "shape is fixed by the file");
    }
    Expected<ImportedMscclAlgorithm> imported = importMscclXml(source);
    if (!imported.ok()) return imported.status();
    loaded.algorithm = std::move(imported->algorithm);
    imported->algorithm = Algorithm{};
    loaded.msccl = std::move(imported).value();
  }
  loaded.source = std::move(source);
  return loaded;
}

Expected<LoadedAlgorithm> loadAlgorithmFile(const std::string& path, const RescclOptions& options) {
  SourceText source;
  try {
    source = readSourceFile(path);
  } catch (const DiagnosticError& error) {
    return statusFromDiagnostic(error, ErrorCode::IoError);
  }
  return loadAlgorithmText(std::move(source), options);
}

Status proveAlgorithm(const Algorithm& algorithm, const std::string& fileName) {
  const CheckReport report = checkAlgorithm(algorithm);
  if (report.ok()) return {};
  const std::vector<Diagnostic> diagnostics = violationDiagnostics(algorithm, *report.violation);
  if (!diagnostics.empty()) return Status(ErrorCode::InvalidInput, diagnostics.front());
  return makeError(ErrorCode::InvalidInput, fileName, SourceLoc{}, "the algorithm fails the semantic check");
}

Expected<LoadedAlgorithm> loadProvedAlgorithm(SourceText source, const RescclParameters& parameters) {
  RescclOptions options;
  options.parameterOverrides = parameters;
  Expected<LoadedAlgorithm> loaded = loadAlgorithmText(std::move(source), options);
  if (!loaded) return loaded;
  if (Status status = proveAlgorithm(loaded->algorithm, loaded->source.name()); !status) return status;
  return loaded;
}

Expected<LoadedAlgorithm> loadProvedAlgorithmFile(const std::string& path, const RescclParameters& parameters) {
  SourceText source;
  try {
    source = readSourceFile(path);
  } catch (const DiagnosticError& error) {
    return statusFromDiagnostic(error, ErrorCode::IoError);
  }
  return loadProvedAlgorithm(std::move(source), parameters);
}

Expected<Algorithm> loadRescclAlgorithm(const std::string& path, const RescclParameters& parameters) {
  Expected<LoadedAlgorithm> loaded = loadProvedAlgorithmFile(path, parameters);
  if (!loaded) return loaded.status();
  return std::move(loaded->algorithm);
}

Expected<Algorithm> loadRescclAlgorithm(const std::string& path, int32_t nRanks, int32_t gpusPerNode) {
  RescclParameters parameters;
  if (nRanks > 0) parameters.emplace_back("nRanks", nRanks);
  if (gpusPerNode > 0) parameters.emplace_back("GPUPerNode", gpusPerNode);
  return loadRescclAlgorithm(path, parameters);
}

}  // namespace tuccl
