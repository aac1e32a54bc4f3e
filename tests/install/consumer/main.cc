// A program built against an installed TuCCL (find_package(TuCCL) or pkg-config tuccl-stages): reads a
// ResCCLang program, proves it, and counts the device headers embedded in tuccl_kernelgen.
#include <cstdio>
#include <exception>

#include "kernelgen/device_headers.h"
#include "lang/resccl.h"
#include "lang/semantic_check.h"
#include "support/source_text.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s PROGRAM.resccl\n", argv[0]);
    return 2;
  }
  try {
    tuccl::RescclOptions options;
    options.parameterOverrides = {{"nRanks", 8}, {"GPUPerNode", 4}};
    const tuccl::Expected<tuccl::Algorithm> compiled = tuccl::compileResccl(tuccl::readSourceFile(argv[1]), options);
    if (!compiled) {
      std::fprintf(stderr, "consumer: %s", compiled.status().toString().c_str());
      return 1;
    }
    const tuccl::Algorithm& algorithm = *compiled;
    const bool proven = tuccl::checkAlgorithm(algorithm).ok();
    std::printf("consumer: %d ranks, %zu operations, %s; %zu device headers\n", algorithm.nRanks,
                algorithm.ops.size(), proven ? "proven" : "NOT proven", tuccl::deviceHeaders().size());
    return proven && !tuccl::deviceHeaders().empty() ? 0 : 1;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "consumer: %s\n", error.what());
    return 1;
  }
}
