// NCCL topology XML (the NCCL_TOPO_FILE / NCCL_TOPO_DUMP_FILE format): import and export.
//
// In:  the text of one file, which describes one node.   Out: a one-node Topology (compose N copies
//      with composeCluster), plus warnings about numbers the file did not give.
//
// Reads <system>/<cpu>/<pci>.../<gpu>/<nvlink>, <nic>/<net>, full dumps and partial vendor files
// that give only the PCI tree with class codes (0x0604 bridge, 0x0300/0x0302 GPU, 0x0200/0x0207
// NIC). Every <pci> bridge becomes a PCIe switch, so GPU-NIC affinity (binding.h) follows the PCI
// tree; a <nic> without a <pci> parent hangs off its <cpu>. NVLink targets with tclass 0x068000
// are NVSwitches, folded into one logical NVSwitch. Missing link speeds, NIC speeds and GPU
// architectures get the defaults of defaults.h and a warning; malformed XML is a DiagnosticError
// with line and column.
#pragma once

#include <string>
#include <vector>

#include "support/source_text.h"
#include "topo/topology.h"

namespace tuccl {

struct NcclXmlImport {
  Topology topology;
  std::vector<Diagnostic> warnings;  ///< also logged to the "topo" logger
};

NcclXmlImport importNcclXml(const SourceText& source);

/// One node of a topology as an NCCL topology file (PCI tree under each root complex, <gpu> with
/// <nvlink>, <nic>/<net>). Missing PCI bus ids are made up ("0000:NN:00.0"), consistently.
std::string exportNcclXml(const Topology& topology, int32_t node = 0);

}  // namespace tuccl
