// Loading an algorithm file whatever its language: ResCCLang programs and MSCCL algorithm XML.
//
// In:  a path (or a file's text and name) and the ResCCLang options (header parameters, limits).
// Out: a LoadedAlgorithm: the Algorithm, the source text (for diagnostics that quote it), the
//      format, and for MSCCL XML the file's own schedule; or a Status naming file:line:col.
//
// The format: a name ending in ".xml", or text whose first non-blank character is '<', is MSCCL
// XML (lang/msccl_xml.h); anything else is ResCCLang (lang/resccl.h). ResCCLang parameter
// overrides are refused for XML, which has no parameters.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "lang/algorithm.h"
#include "lang/msccl_xml.h"
#include "lang/resccl.h"
#include "support/source_text.h"
#include "support/status.h"

namespace tuccl {

enum class AlgorithmFormat : uint8_t { Resccl, MscclXml };

/// "ResCCLang", "MSCCL XML".
std::string_view algorithmFormatName(AlgorithmFormat format);

/// The format of a file from its name and text (see above).
AlgorithmFormat detectAlgorithmFormat(std::string_view fileName, std::string_view text);

struct LoadedAlgorithm {
  Algorithm algorithm;
  SourceText source;
  AlgorithmFormat format = AlgorithmFormat::Resccl;
  std::optional<ImportedMscclAlgorithm> msccl;  ///< MSCCL XML: the import, whose algorithm is `algorithm`
};

/// Compiles or imports a text already read. The LoadedAlgorithm's `msccl->algorithm` is left
/// empty (the algorithm is `algorithm`).
Expected<LoadedAlgorithm> loadAlgorithmText(SourceText source, const RescclOptions& options = {});

/// Reads the file at `path` and loads it (IoError naming the file when it cannot be read).
Expected<LoadedAlgorithm> loadAlgorithmFile(const std::string& path, const RescclOptions& options = {});

/// The semantic checker's verdict (lang/semantic_check.h) as a status: ok, or InvalidInput with the
/// first violation's diagnostic (file:line:col of its operation; `fileName` when it has none).
Status proveAlgorithm(const Algorithm& algorithm, const std::string& fileName);

/// loadAlgorithmText, then proveAlgorithm. `parameters` override ResCCLang header parameters
/// (RescclOptions::parameterOverrides); an XML file takes none (InvalidArgument naming the first).
/// For XML the result keeps the file's schedule (LoadedAlgorithm::msccl), which the as-written
/// scheduler runs.
Expected<LoadedAlgorithm> loadProvedAlgorithm(SourceText source, const RescclParameters& parameters);
/// As loadProvedAlgorithm, reading the file at `path` (IoError naming it when it cannot be read).
Expected<LoadedAlgorithm> loadProvedAlgorithmFile(const std::string& path, const RescclParameters& parameters);

/// loadProvedAlgorithmFile's algorithm alone (the benchmarks, the tuner's sketch candidates and
/// the tests load the example programs so).
Expected<Algorithm> loadRescclAlgorithm(const std::string& path, const RescclParameters& parameters);
/// The same at a shape: the ResCCLang parameters nRanks and GPUPerNode set to `nRanks` and
/// `gpusPerNode` where they are > 0.
Expected<Algorithm> loadRescclAlgorithm(const std::string& path, int32_t nRanks, int32_t gpusPerNode);

}  // namespace tuccl
