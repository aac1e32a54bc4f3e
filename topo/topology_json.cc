#include "topo/topology_json.h"

#include "support/json_text.h"
#include "topo/limits.h"

#include <charconv>
#include <set>

namespace tuccl {

namespace {

using nlohmann::json;

constexpr int kFormatVersion = 1;

std::string refToString(DeviceRef ref) {
  switch (ref.kind) {
    case DeviceKind::Gpu:
      return "gpu:" + std::to_string(ref.index);
    case DeviceKind::Nic:
      return "nic:" + std::to_string(ref.index);
    case DeviceKind::Switch:
      return "switch:" + std::to_string(ref.index);
  }
  return "?";
}

class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const std::string& path, const std::string& message) const {
    throw DiagnosticError(
        Diagnostic{Severity::Error, file_, {}, (path.empty() ? "" : path + ": ") + message});
  }

  const json& member(const json& object, const std::string& path, const char* key) const {
    auto it = object.find(key);
    if (it == object.end()) fail(path, std::string("missing required field '") + key + "'");
    return *it;
  }

  void checkKeys(const json& object, const std::string& path, std::set<std::string> allowed) const {
    if (!object.is_object()) fail(path, "expected an object");
    for (auto it = object.begin(); it != object.end(); ++it) {
      if (!allowed.contains(it.key())) fail(path, "unknown field '" + it.key() + "'");
    }
  }

  std::string string(const json& object, const std::string& path, const char* key, bool required) const {
    if (!required && !object.contains(key)) return "";
    const json& value = member(object, path, key);
    if (!value.is_string()) fail(path + "." + key, "expected a string");
    return value.get<std::string>();
  }

  int32_t integer(const json& object, const std::string& path, const char* key, bool required,
                  int32_t fallback) const {
    if (!required && !object.contains(key)) return fallback;
    const json& value = member(object, path, key);
    if (!value.is_number_integer()) fail(path + "." + key, "expected an integer");
    int64_t number = value.get<int64_t>();
    if (number < INT32_MIN || number > INT32_MAX) fail(path + "." + key, "integer out of range");
    return static_cast<int32_t>(number);
  }

  double number(const json& object, const std::string& path, const char* key, bool required,
                double fallback) const {
    if (!required && !object.contains(key)) return fallback;
    const json& value = member(object, path, key);
    if (!value.is_number()) fail(path + "." + key, "expected a number");
    return value.get<double>();
  }

  /// A number of `key` checked against `range` (its JSON path and the range in the message).
  double bounded(const json& object, const std::string& path, const char* key, bool required, double fallback,
                 const NumberRange& range) const {
    if (!required && !object.contains(key)) return fallback;
    double value = number(object, path, key, required, fallback);
    if (std::optional<std::string> problem = rangeProblem(value, range))
      fail(path.empty() ? key : path + "." + key, *problem);
    return value;
  }

  bool boolean(const json& object, const std::string& path, const char* key, bool fallback) const {
    if (!object.contains(key)) return fallback;
    const json& value = object.at(key);
    if (!value.is_boolean()) fail(path + "." + key, "expected true or false");
    return value.get<bool>();
  }

  const json& array(const json& object, const std::string& path, const char* key) const {
    static const json kEmpty = json::array();
    if (!object.contains(key)) return kEmpty;
    const json& value = object.at(key);
    if (!value.is_array()) fail(path.empty() ? key : path + "." + key, "expected an array");
    return value;
  }

  DeviceRef ref(const json& object, const std::string& path, const char* key) const {
    std::string text = string(object, path, key, true);
    size_t colon = text.find(':');
    std::string_view kind = std::string_view(text).substr(0, colon);
    DeviceRef result;
    if (kind == "gpu") {
      result.kind = DeviceKind::Gpu;
    } else if (kind == "nic") {
      result.kind = DeviceKind::Nic;
    } else if (kind == "switch") {
      result.kind = DeviceKind::Switch;
    } else {
      fail(path + "." + key, "expected 'gpu:N', 'nic:N' or 'switch:N' (got '" + text + "')");
    }
    const char* begin = text.data() + (colon == std::string::npos ? text.size() : colon + 1);
    const char* end = text.data() + text.size();
    auto [stop, error] = std::from_chars(begin, end, result.index);
    if (colon == std::string::npos || error != std::errc() || stop != end || begin == end) {
      fail(path + "." + key, "expected 'gpu:N', 'nic:N' or 'switch:N' (got '" + text + "')");
    }
    return result;
  }

 private:
  std::string file_;
};

}  // namespace

json topologyToJson(const Topology& topology) {
  json out;
  out["format"] = "tuccl-topology";
  out["version"] = kFormatVersion;
  out["name"] = topology.name;
  out["signature"] = signatureHex(topologySignature(topology));
  if (!topology.costModel.empty()) out["costModel"] = topology.costModel;
  json nodes = json::array();
  for (const Node& node : topology.nodes) nodes.push_back(json{{"name", node.name}});
  out["nodes"] = nodes;
  json gpus = json::array();
  for (const Gpu& gpu : topology.gpus) {
    json g{{"rank", gpu.rank}, {"node", gpu.node}};
    if (gpu.sm != 0) g["sm"] = gpu.sm;
    if (!gpu.arch.empty()) g["arch"] = gpu.arch;
    if (!gpu.pciBusId.empty()) g["pci"] = gpu.pciBusId;
    gpus.push_back(g);
  }
  out["gpus"] = gpus;
  json nics = json::array();
  for (const Nic& nic : topology.nics) {
    json n{{"node", nic.node}, {"bandwidth_gbps", nic.bandwidthGBps}, {"gdr", nic.gdr}};
    if (!nic.name.empty()) n["name"] = nic.name;
    if (!nic.pciBusId.empty()) n["pci"] = nic.pciBusId;
    nics.push_back(n);
  }
  out["nics"] = nics;
  json switches = json::array();
  for (const Switch& sw : topology.switches) {
    json s{{"kind", std::string(switchKindName(sw.kind))}, {"node", sw.node}};
    if (!sw.name.empty()) s["name"] = sw.name;
    if (!sw.pciBusId.empty()) s["pci"] = sw.pciBusId;
    switches.push_back(s);
  }
  out["switches"] = switches;
  json links = json::array();
  for (const Link& link : topology.links) {
    links.push_back(json{{"a", refToString(link.a)},
                         {"b", refToString(link.b)},
                         {"kind", std::string(linkKindName(link.kind))},
                         {"alpha_us", link.alphaUs},
                         {"bandwidth_gbps", link.bandwidthGBps},
                         {"lanes", link.lanes}});
  }
  out["links"] = links;
  return out;
}

Topology topologyFromJson(const json& in, const std::string& file) {
  Reader reader(file);
  reader.checkKeys(in, "",
                   {"format", "version", "name", "signature", "costModel", "nodes", "gpus", "nics", "switches", "links"});
  if (in.contains("format") && in["format"] != "tuccl-topology") {
    reader.fail("format", "expected \"tuccl-topology\"");
  }
  int32_t version = reader.integer(in, "", "version", false, kFormatVersion);
  if (version != kFormatVersion)
    reader.fail("version", "unsupported version " + std::to_string(version) + " (expected 1)");
  Topology topology;
  topology.name = reader.string(in, "", "name", false);
  topology.costModel = reader.string(in, "", "costModel", false);

  const json& nodes = reader.member(in, "", "nodes");
  if (nodes.is_number_integer()) {
    auto count = static_cast<int32_t>(reader.bounded(in, "", "nodes", true, 0, topo_limits::kNodes));
    topology.nodes.resize(count);
  } else {
    if (!nodes.is_array()) reader.fail("nodes", "expected an array of nodes or a node count");
    for (size_t i = 0; i < nodes.size(); ++i) {
      std::string path = "nodes[" + std::to_string(i) + "]";
      reader.checkKeys(nodes[i], path, {"name"});
      topology.nodes.push_back(Node{reader.string(nodes[i], path, "name", false)});
    }
  }
  const json& gpus = reader.array(in, "", "gpus");
  for (size_t i = 0; i < gpus.size(); ++i) {
    std::string path = "gpus[" + std::to_string(i) + "]";
    reader.checkKeys(gpus[i], path, {"rank", "node", "sm", "arch", "pci"});
    Gpu gpu;
    gpu.rank = reader.integer(gpus[i], path, "rank", false, static_cast<int32_t>(i));
    gpu.node = reader.integer(gpus[i], path, "node", true, 0);
    gpu.sm = static_cast<int32_t>(reader.bounded(gpus[i], path, "sm", false, 0, topo_limits::kGpuSm));
    gpu.arch = reader.string(gpus[i], path, "arch", false);
    gpu.pciBusId = reader.string(gpus[i], path, "pci", false);
    topology.gpus.push_back(gpu);
  }
  const json& nics = reader.array(in, "", "nics");
  for (size_t i = 0; i < nics.size(); ++i) {
    std::string path = "nics[" + std::to_string(i) + "]";
    reader.checkKeys(nics[i], path, {"node", "name", "bandwidth_gbps", "pci", "gdr"});
    Nic nic;
    nic.node = reader.integer(nics[i], path, "node", true, 0);
    nic.name = reader.string(nics[i], path, "name", false);
    nic.bandwidthGBps = reader.bounded(nics[i], path, "bandwidth_gbps", true, 0, topo_limits::kNicBandwidthGBps);
    nic.pciBusId = reader.string(nics[i], path, "pci", false);
    nic.gdr = reader.boolean(nics[i], path, "gdr", true);
    topology.nics.push_back(nic);
  }
  const json& switches = reader.array(in, "", "switches");
  for (size_t i = 0; i < switches.size(); ++i) {
    std::string path = "switches[" + std::to_string(i) + "]";
    reader.checkKeys(switches[i], path, {"kind", "node", "name", "pci"});
    Switch sw;
    std::string kind = reader.string(switches[i], path, "kind", true);
    auto parsed = parseSwitchKind(kind);
    if (!parsed) {
      reader.fail(path + ".kind",
                  "unknown switch kind '" + kind + "' (nvswitch, pcie-switch, cpu, tor, aggregation)");
    }
    sw.kind = *parsed;
    sw.node = reader.integer(switches[i], path, "node", !isNetworkSwitch(sw.kind), -1);
    sw.name = reader.string(switches[i], path, "name", false);
    sw.pciBusId = reader.string(switches[i], path, "pci", false);
    topology.switches.push_back(sw);
  }
  const json& links = reader.array(in, "", "links");
  for (size_t i = 0; i < links.size(); ++i) {
    std::string path = "links[" + std::to_string(i) + "]";
    reader.checkKeys(links[i], path, {"a", "b", "kind", "alpha_us", "bandwidth_gbps", "lanes"});
    Link link;
    link.a = reader.ref(links[i], path, "a");
    link.b = reader.ref(links[i], path, "b");
    std::string kind = reader.string(links[i], path, "kind", true);
    auto parsed = parseLinkKind(kind);
    if (!parsed) reader.fail(path + ".kind", "unknown link kind '" + kind + "' (nvlink, xgmi, pcie, network, smp)");
    link.kind = *parsed;
    link.alphaUs = reader.bounded(links[i], path, "alpha_us", false, 0.0, topo_limits::kLinkAlphaUs);
    link.bandwidthGBps = reader.bounded(links[i], path, "bandwidth_gbps", true, 0, topo_limits::kLinkBandwidthGBps);
    link.lanes = static_cast<int32_t>(reader.bounded(links[i], path, "lanes", false, 1, topo_limits::kLinkLanes));
    topology.links.push_back(link);
  }
  if (auto problem = validateTopology(topology)) reader.fail("", *problem);
  return topology;
}

std::string writeTopologyJson(const Topology& topology) { return topologyToJson(topology).dump(2) + "\n"; }

Topology readTopologyJson(const SourceText& source) {
  Expected<json> parsed = parseJsonText(source);
  throwIfError(parsed.status());
  return topologyFromJson(*parsed, source.name());
}

}  // namespace tuccl
