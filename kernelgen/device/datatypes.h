// Datatypes and reduction operations of the primitives: float, half, bfloat16, double, int32,
// int64, uint8 (NCCL's set minus int8/uint32/uint64/fp8) and sum, prod, min, max, avg.
//
// half and bfloat16 are our own 16-bit storage types, so the library needs no cuda_fp16.h (NVRTC
// compiles it without include paths). The host converts in integer arithmetic, the device with
// PTX cvt (bfloat16 from sm_80), both rounding to nearest even, so host and device compute
// bit-identical results for every value but NaN payloads. Arithmetic on them is done in float and
// rounded once per operation, as NCCL's generic path does; reduce_copy.h's packed sum and product
// (f16x2 / bf16x2) round once too and give the same bits (float holds 2p + 2 bits of either
// type, so rounding through float is exact rounding).
// Integer sum and product wrap around (computed unsigned: no undefined behaviour on the host).
#pragma once

#include "kernel_args.h"
#include "tuccl_device.h"

namespace tuccl::dev {

struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

#if defined(TUCCL_DEVICE_COMPILE)
// The device converts with the hardware's instructions: cvt rounds to nearest even exactly as
// the integer code below does (NaN payloads aside), without its branches and loops.
TUCCL_DEVICE_INLINE float toFloat(Half h) {
  float value;
  asm("cvt.f32.f16 %0, %1;" : "=f"(value) : "h"(h.bits));
  return value;
}
TUCCL_DEVICE_INLINE Half toHalf(float value) {
  Half h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(value));
  return h;
}
#else
TUCCL_DEVICE_INLINE float toFloat(Half h) {
  const uint32_t sign = static_cast<uint32_t>(h.bits & 0x8000u) << 16;
  uint32_t exponent = (h.bits >> 10) & 0x1fu;
  uint32_t mantissa = h.bits & 0x3ffu;
  if (exponent == 0x1f) return bitsFloat(sign | 0x7f800000u | (mantissa << 13));  // inf, nan
  if (exponent == 0) {
    if (mantissa == 0) return bitsFloat(sign);
    // Subnormal: normalise.
    int shift = 0;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      ++shift;
    }
    mantissa &= 0x3ffu;
    exponent = static_cast<uint32_t>(1 - shift);
    return bitsFloat(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  }
  return bitsFloat(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

TUCCL_DEVICE_INLINE Half toHalf(float value) {
  const uint32_t bits = floatBits(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t absBits = bits & 0x7fffffffu;
  if (absBits >= 0x7f800000u) {  // inf, nan
    return Half{static_cast<uint16_t>(sign | 0x7c00u | (absBits > 0x7f800000u ? 0x200u : 0u))};
  }
  if (absBits >= 0x477ff000u) return Half{static_cast<uint16_t>(sign | 0x7c00u)};  // rounds to inf
  if (absBits < 0x38800000u) {  // below the smallest normal half: subnormal or zero
    if (absBits < 0x33000000u) return Half{sign};  // rounds to zero
    const uint32_t exponent = absBits >> 23;
    const uint32_t mantissa = (absBits & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - exponent;  // 14..24
    uint32_t result = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1u);
    if (rest > halfway || (rest == halfway && (result & 1u))) ++result;
    return Half{static_cast<uint16_t>(sign | result)};
  }
  uint32_t result = ((absBits >> 13) - (112u << 10));
  const uint32_t rest = absBits & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (result & 1u))) ++result;
  return Half{static_cast<uint16_t>(sign | result)};
}
#endif

TUCCL_DEVICE_INLINE float toFloat(BFloat16 b) { return bitsFloat(static_cast<uint32_t>(b.bits) << 16); }

TUCCL_DEVICE_INLINE BFloat16 toBFloat16(float value) {
#if defined(TUCCL_DEVICE_COMPILE) && __CUDA_ARCH__ >= 800
  BFloat16 b;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b.bits) : "f"(value));
  return b;
#else
  const uint32_t bits = floatBits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return BFloat16{static_cast<uint16_t>((bits >> 16) | 0x40u)};  // nan
  const uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);
  return BFloat16{static_cast<uint16_t>(rounded >> 16)};
#endif
}

/// Element-wise reduction operators. Avg reduces as a sum; the kernel's epilogue divides by nRanks.
struct OpSum {
  template <typename T>
  TUCCL_DEVICE_INLINE static T apply(T a, T b) { return a + b; }
};
struct OpProd {
  template <typename T>
  TUCCL_DEVICE_INLINE static T apply(T a, T b) { return a * b; }
};
struct OpMin {
  template <typename T>
  TUCCL_DEVICE_INLINE static T apply(T a, T b) { return b < a ? b : a; }
};
struct OpMax {
  template <typename T>
  TUCCL_DEVICE_INLINE static T apply(T a, T b) { return a < b ? b : a; }
};

/// One element of type T combined with Op: 16-bit floats go through float; signed integer sums
/// and products wrap (computed in the unsigned type).
template <typename Op, typename T>
struct Combine {
  TUCCL_DEVICE_INLINE static T apply(T a, T b) { return Op::apply(a, b); }
};
template <typename Op>
struct Combine<Op, Half> {
  TUCCL_DEVICE_INLINE static Half apply(Half a, Half b) { return toHalf(Op::apply(toFloat(a), toFloat(b))); }
};
template <typename Op>
struct Combine<Op, BFloat16> {
  TUCCL_DEVICE_INLINE static BFloat16 apply(BFloat16 a, BFloat16 b) {
    return toBFloat16(Op::apply(toFloat(a), toFloat(b)));
  }
};
template <typename U, typename S>
struct WrapCombine {
  template <typename Op>
  TUCCL_DEVICE_INLINE static S apply(S a, S b) {
    return static_cast<S>(Op::apply(static_cast<U>(a), static_cast<U>(b)));
  }
};
template <>
struct Combine<OpSum, int32_t> {
  TUCCL_DEVICE_INLINE static int32_t apply(int32_t a, int32_t b) { return WrapCombine<uint32_t, int32_t>::apply<OpSum>(a, b); }
};
template <>
struct Combine<OpProd, int32_t> {
  TUCCL_DEVICE_INLINE static int32_t apply(int32_t a, int32_t b) { return WrapCombine<uint32_t, int32_t>::apply<OpProd>(a, b); }
};
template <>
struct Combine<OpSum, int64_t> {
  TUCCL_DEVICE_INLINE static int64_t apply(int64_t a, int64_t b) { return WrapCombine<uint64_t, int64_t>::apply<OpSum>(a, b); }
};
template <>
struct Combine<OpProd, int64_t> {
  TUCCL_DEVICE_INLINE static int64_t apply(int64_t a, int64_t b) { return WrapCombine<uint64_t, int64_t>::apply<OpProd>(a, b); }
};
template <>
struct Combine<OpSum, uint8_t> {
  TUCCL_DEVICE_INLINE static uint8_t apply(uint8_t a, uint8_t b) { return static_cast<uint8_t>(a + b); }
};
template <>
struct Combine<OpProd, uint8_t> {
  TUCCL_DEVICE_INLINE static uint8_t apply(uint8_t a, uint8_t b) { return static_cast<uint8_t>(a * b); }
};

/// Size in bytes of a datatype (0 for an unknown one).
TUCCL_DEVICE_INLINE int32_t elementSize(int32_t dtype) {
  switch (dtype) {
    case kUint8: return 1;
    case kFloat16:
    case kBFloat16: return 2;
    case kInt32:
    case kFloat32: return 4;
    case kInt64:
    case kFloat64: return 8;
    default: return 0;
  }
}

template <typename T>
TUCCL_HOST_DEVICE void divideElements(T* data, int64_t n, int32_t divisor) {
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) data[i] = static_cast<T>(data[i] / static_cast<T>(divisor));
}

/// data[i] /= divisor (the avg epilogue); integers truncate toward zero.
TUCCL_DEVICE_NOINLINE void divideElements(int32_t dtype, void* data, int64_t n, int32_t divisor) {
  switch (dtype) {
    case kUint8: divideElements(static_cast<uint8_t*>(data), n, divisor); break;
    case kInt32: divideElements(static_cast<int32_t*>(data), n, divisor); break;
    case kInt64: divideElements(static_cast<int64_t*>(data), n, divisor); break;
    case kFloat32: divideElements(static_cast<float*>(data), n, divisor); break;
    case kFloat64: divideElements(static_cast<double*>(data), n, divisor); break;
    case kFloat16: {
      Half* h = static_cast<Half*>(data);
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x) h[i] = toHalf(toFloat(h[i]) / static_cast<float>(divisor));
      break;
    }
    case kBFloat16: {
      BFloat16* b = static_cast<BFloat16*>(data);
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        b[i] = toBFloat16(toFloat(b[i]) / static_cast<float>(divisor));
      }
      break;
    }
    default: break;
  }
}

}  // namespace tuccl::dev
