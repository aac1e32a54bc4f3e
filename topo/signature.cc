// Topology signature: the key of lookup tables (TuCCL §IV-A, "indexed by topology signatures").
#include <cinttypes>
#include <cmath>
#include <cstdio>

#include "topo/topology.h"

namespace tuccl {

namespace {

// FNV-1a, 64 bit (offset basis and prime of the published FNV parameters).
class Fnv1a {
 public:
  void add(std::string_view text) {
    for (char c : text) {
      hash_ ^= static_cast<unsigned char>(c);
      hash_ *= 0x100000001b3ULL;
    }
    hash_ ^= 0xff;  // field separator, so "ab","c" and "a","bc" differ
    hash_ *= 0x100000001b3ULL;
  }
  void add(int64_t value) { add(std::string_view(std::to_string(value))); }
  // Rounded to 1e-6 so that 25 and 25.0000000001 (JSON round trips, unit conversions) agree.
  void add(double value) { add(static_cast<int64_t>(std::llround(value * 1e6))); }
  uint64_t value() const { return hash_; }

 private:
  uint64_t hash_ = 0xcbf29ce484222325ULL;
};

}  // namespace

uint64_t topologySignature(const Topology& topology) {
  Fnv1a hash;
  hash.add(std::string_view("tuccl-topology-v1"));
  hash.add(static_cast<int64_t>(topology.nodes.size()));
  hash.add(static_cast<int64_t>(topology.gpus.size()));
  for (const Gpu& gpu : topology.gpus) {
    hash.add(static_cast<int64_t>(gpu.node));
    hash.add(static_cast<int64_t>(gpu.sm));
    if (!gpu.arch.empty()) hash.add(std::string_view(gpu.arch));  // absent for NVIDIA: pinned values stay
  }
  hash.add(static_cast<int64_t>(topology.nics.size()));
  for (const Nic& nic : topology.nics) {
    hash.add(static_cast<int64_t>(nic.node));
    hash.add(nic.bandwidthGBps);
    hash.add(static_cast<int64_t>(nic.gdr));
  }
  hash.add(static_cast<int64_t>(topology.switches.size()));
  for (const Switch& sw : topology.switches) {
    hash.add(static_cast<int64_t>(sw.kind));
    hash.add(static_cast<int64_t>(sw.node));
  }
  hash.add(static_cast<int64_t>(topology.links.size()));
  for (const Link& link : topology.links) {
    hash.add(static_cast<int64_t>(link.a.kind));
    hash.add(static_cast<int64_t>(link.a.index));
    hash.add(static_cast<int64_t>(link.b.kind));
    hash.add(static_cast<int64_t>(link.b.index));
    hash.add(static_cast<int64_t>(link.kind));
    hash.add(static_cast<int64_t>(link.lanes));
    hash.add(link.alphaUs);
    hash.add(link.bandwidthGBps);
  }
  return hash.value();
}

std::string signatureHex(uint64_t signature) {
  char buffer[17];
  std::snprintf(buffer, sizeof buffer, "%016" PRIx64, signature);
  return buffer;
}

}  // namespace tuccl
