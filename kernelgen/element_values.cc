// Element values on the host (element_values.h).
#include "kernelgen/element_values.h"

#include <climits>
#include <cmath>
#include <cstring>
#include <sstream>

#include "kernelgen/device/datatypes.h"

namespace tuccl {

bool isIntegerType(DataType type) {
  return type == DataType::Int32 || type == DataType::Int64 || type == DataType::Uint8 || type == DataType::Int8 ||
         type == DataType::Uint32 || type == DataType::Uint64;
}

bool isUnsignedType(DataType type) {
  return type == DataType::Uint8 || type == DataType::Uint32 || type == DataType::Uint64;
}

int64_t integerOf(DataType type, double value) {
  if (std::isnan(value)) return 0;
  // 2^63 and above is only a uint64's (through its bits; 2^64 and above is what the largest uint64
  // values read as in float64, so all ones); below, the integer part.
  const auto bits = value >= 0x1p64   ? int64_t{-1}
                    : value >= 0x1p63 ? static_cast<int64_t>(static_cast<uint64_t>(value))
                    : value <= -0x1p63 ? INT64_MIN
                                       : static_cast<int64_t>(value);
  const auto u = static_cast<uint64_t>(bits);
  switch (type) {
    case DataType::Int8: return static_cast<int8_t>(static_cast<uint8_t>(u));
    case DataType::Uint8: return static_cast<uint8_t>(u);
    case DataType::Int32: return static_cast<int32_t>(static_cast<uint32_t>(u));
    case DataType::Uint32: return static_cast<uint32_t>(u);
    default: return bits;
  }
}

double integerValue(DataType type, int64_t bits) {
  return type == DataType::Uint64 ? static_cast<double>(static_cast<uint64_t>(bits)) : static_cast<double>(bits);
}

double unitRoundoff(DataType type) {
  switch (type) {
    case DataType::Float8E4M3: return std::ldexp(1.0, -4);
    case DataType::Float8E5M2: return std::ldexp(1.0, -3);
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
    case DataType::Int8: return static_cast<int8_t>(*p);
    case DataType::Uint32: { uint32_t v; std::memcpy(&v, p, 4); return v; }
    case DataType::Uint64: { uint64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    case DataType::Float8E4M3: return dev::toFloat(dev::Fp8E4M3{*p});
    case DataType::Float8E5M2: return dev::toFloat(dev::Fp8E5M2{*p});
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
    // Wrapped to the width, so -1 is the largest unsigned value.
    case DataType::Int8: *p = static_cast<uint8_t>(integerOf(type, value)); break;
    case DataType::Uint32: { const auto v = static_cast<uint32_t>(integerOf(type, value)); std::memcpy(p, &v, 4); break; }
    case DataType::Uint64: { const auto v = static_cast<uint64_t>(integerOf(type, value)); std::memcpy(p, &v, 8); break; }
    case DataType::Float8E4M3: *p = dev::toFp8E4M3(static_cast<float>(value)).bits; break;
    case DataType::Float8E5M2: *p = dev::toFp8E5M2(static_cast<float>(value)).bits; break;
  }
}

double wrapInteger(DataType type, int64_t value) {
  const auto bits = static_cast<uint64_t>(value);
  switch (type) {
    case DataType::Int8: return static_cast<int8_t>(static_cast<uint8_t>(bits));
    case DataType::Int32: return static_cast<int32_t>(static_cast<uint32_t>(bits));
    case DataType::Uint8: return static_cast<uint8_t>(bits);
    case DataType::Uint32: return static_cast<uint32_t>(bits);
    case DataType::Uint64: return static_cast<double>(bits);
    default: return static_cast<double>(value);
  }
}

std::string formatElement(DataType type, double value) {
  std::ostringstream out;
  if (type == DataType::Uint64 && value >= 0x1p63) {
    out << static_cast<uint64_t>(integerOf(type, value));
  } else if (isIntegerType(type)) {
    out << static_cast<int64_t>(value);
  } else {
    out.precision(type == DataType::Float64 ? 17 : 9);  // enough to tell neighbouring values apart
    out << value;
  }
  return out.str();
}

}  // namespace tuccl
