// libFuzzer target for the socket network's wire formats (net/handshake.h): the handle a peer
// ships, the hellos arriving on a listener's sockets in pieces, the message header and its
// matching against a posted receive (build with -DTUCCL_FUZZ=ON and clang).
//
//   build-fuzz/fuzz/net_handshake_fuzzer -max_total_time=300 -dict=fuzz/net_handshake.dict \
//       build-fuzz/corpus_net_new fuzz/corpus_net
//
// The input format is tests/net/handshake_exercise.h's. A broken invariant aborts with its
// description; a crash or sanitizer report is a bug. Save what it finds in fuzz/corpus_net/ so
// handshake_test replays it in every build.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>

#include "tests/net/handshake_exercise.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string broken =
      tuccl::net::testing::exerciseHandshake(std::span<const std::byte>(reinterpret_cast<const std::byte*>(data), size));
  if (!broken.empty()) {
    std::fprintf(stderr, "net_handshake_fuzzer: %s\n", broken.c_str());
    std::abort();
  }
  return 0;
}
