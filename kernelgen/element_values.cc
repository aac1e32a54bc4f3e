// Element values on the host (element_values.h).
#include "kernelgen/element_values.h"

#include <cmath>
#include <cstring>
#include <sstream>

#include "kernelgen/device/datatypes.h"

namespace tuccl {

bool isIntegerType(DataType type) {
  return type == DataType::Int32 || type == DataType::Int64 || type == DataType::Uint8;
}

double unitRoundoff(DataType type) {
  switch (type) {
    case DataType::Float16: return std::ldexp(1.0, -11);
    case DataType::BFloat16: return std::ldexp(1.0, -8);
    case DataType::Float32: return std::ldexp(1.0, -24);
    case DataType::Float64: return std::ldexp(1.0, -53);
    default: return 0;
  }
}

double readElement(DataType type, const void* element) {
  const auto* p = static_cast<const unsigned char*>(element);
  switch (type) {
    case DataType::Float32: { float v; std::memcpy(&v, p, 4); return v; }
    case DataType::Float64: { double v; std::memcpy(&v, p, 8); return v; }
    case DataType::Float16: { dev::Half h; std::memcpy(&h, p, 2); return dev::toFloat(h); }
    case DataType::BFloat16: { dev::BFloat16 b; std::memcpy(&b, p, 2); return dev::toFloat(b); }
    case DataType::Int32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case DataType::Int64: { int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    case DataType::Uint8: return *p;
  }
  return 0;
}

void writeElement(DataType type, void* element, double value) {
  auto* p = static_cast<unsigned char*>(element);
  switch (type) {
    case DataType::Float32: { float v = static_cast<float>(value); std::memcpy(p, &v, 4); break; }
    case DataType::Float64: std::memcpy(p, &value, 8); break;
    case DataType::Float16: { dev::Half h = dev::toHalf(static_cast<float>(value)); std::memcpy(p, &h, 2); break; }
    case DataType::BFloat16: { dev::BFloat16 b = dev::toBFloat16(static_cast<float>(value)); std::memcpy(p, &b, 2); break; }
    case DataType::Int32: { int32_t v = static_cast<int32_t>(value); std::memcpy(p, &v, 4); break; }
    case DataType::Int64: { int64_t v = static_cast<int64_t>(value); std::memcpy(p, &v, 8); break; }
    case DataType::Uint8: *p = static_cast<unsigned char>(value); break;
  }
}

double wrapInteger(DataType type, int64_t value) {
  const auto bits = static_cast<uint64_t>(value);
  switch (type) {
    case DataType::Int32: return static_cast<int32_t>(static_cast<uint32_t>(bits));
    case DataType::Uint8: return static_cast<uint8_t>(bits);
    default: return static_cast<double>(value);
  }
}

std::string formatElement(DataType type, double value) {
  std::ostringstream out;
  if (isIntegerType(type)) {
    out << static_cast<int64_t>(value);
  } else {
    out.precision(type == DataType::Float64 ? 17 : 9);  // enough to tell neighbouring values apart
    out << value;
  }
  return out.str();
}

}  // namespace tuccl
