// libFuzzer target for the tuning-table readers, JSON and NCCL's CSV (build with -DTUCCL_FUZZ=ON
// and clang).
//
//   build-fuzz/fuzz/table_fuzzer -max_total_time=300 -timeout=5 fuzz/corpus_table
//
// Every input must either read into a table that writes back to JSON reading into the same table
// (and, when CSV can hold it, to CSV reading into the same entries' decisions), or fail with a
// Status naming the file; anything else (a crash, a sanitizer report, a hang, an escaping
// exception) is a bug. The input is taken as JSON or CSV the way a table file is (by content).
#include <cstdint>
#include <cstdlib>
#include <string>

#include "table/table_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 16)) return 0;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  tuccl::Expected<tuccl::LoadedTable> loaded = tuccl::parseTableBytes(bytes, "fuzz.table");
  if (!loaded.ok()) {
    const tuccl::Diagnostic& diagnostic = loaded.diagnostic();
    if (diagnostic.file != "fuzz.table" || diagnostic.message.empty()) std::abort();
    return 0;
  }
  const tuccl::LookupTable& table = loaded->table;
  tuccl::Expected<tuccl::LookupTable> again = tuccl::readTableJson(tuccl::writeTableJson(table), "again.json");
  if (!again.ok() || again->entries.size() != table.entries.size()) std::abort();
  for (size_t i = 0; i < table.entries.size(); ++i) {
    tuccl::TableEntry a = table.entries[i], b = again->entries[i];
    a.origin = b.origin = 0;  // CSV lines become JSON indices
    if (!(a == b)) std::abort();
  }
  if (tuccl::Expected<tuccl::CsvTable> csv = tuccl::writeTableCsv(table, /*lossy=*/true); csv.ok()) {
    tuccl::Expected<tuccl::LookupTable> fromCsv = tuccl::readTableCsv(csv->text, "again.csv");
    if (!fromCsv.ok()) std::abort();
  }
  return 0;
}
