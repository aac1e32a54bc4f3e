// Datatypes and reduction operations of the primitives: every datatype of NCCL 2.24+ (int8,
// uint8, int32, uint32, int64, uint64, half, float, double, bfloat16, fp8 e4m3 and e5m2) and sum,
// prod, min, max, avg.
//
// half and bfloat16 are our own 16-bit storage types, so the library needs no cuda_fp16.h (NVRTC
// compiles it without include paths). The host converts in integer arithmetic, the device with
// PTX cvt (bfloat16 from sm_80), both rounding to nearest even, so host and device compute
// bit-identical results for every value but NaN payloads. Arithmetic on them is done in float and
// rounded once per operation, as NCCL's generic path does; reduce_copy.h's packed sum and product
// (f16x2 / bf16x2) round once too and give the same bits (float holds 2p + 2 bits of either
// type, so rounding through float is exact rounding).
// fp8 (Fp8E4M3, Fp8E5M2: the OCP formats, CUDA's __nv_fp8_e4m3 / __nv_fp8_e5m2) converts with the
// same integer code on both sides (no cuda_fp8.h): exactly to float, and back rounding to nearest
// even with CUDA's __NV_SATFINITE rules (what __nv_fp8_e4m3(float) does): finite values beyond the
// largest and infinities saturate to the largest finite value (e4m3 has no infinity), every NaN
// becomes the NaN 0x7f. Arithmetic goes through float and rounds once per operation (a sum or product of two
// fp8 values is exact in float).
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

/// fp8 storage: e4m3 (bias 7, largest 448, no infinity, NaN S.1111.111) and e5m2 (bias 15,
/// largest 57344, infinities S.11111.00 and NaNs at exponent 31).
struct Fp8E4M3 {
  uint8_t bits;
};
struct Fp8E5M2 {
  uint8_t bits;
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

/// The value of an fp8 with `MantissaBits` mantissa bits and exponent bias `Bias` (e4m3: 3, 7;
/// e5m2: 2, 15); exact, every fp8 value is a float.
template <int MantissaBits, int Bias>
TUCCL_DEVICE_INLINE float fp8ToFloat(uint8_t v) {
  constexpr bool kE4M3 = MantissaBits == 3;
  const uint32_t sign = static_cast<uint32_t>(v & 0x80u) << 24;
  const uint32_t magnitude = v & 0x7fu;
  const uint32_t exponent = magnitude >> MantissaBits;
  const uint32_t mantissa = magnitude & ((1u << MantissaBits) - 1u);
  if (kE4M3 && magnitude == 0x7fu) return bitsFloat(sign | 0x7fc00000u);  // NaN
  if (!kE4M3 && exponent == 0x1fu) return bitsFloat(sign | 0x7f800000u | (mantissa != 0 ? 0x400000u : 0u));
  if (exponent == 0) {  // zero and subnormals: mantissa * 2^(1 - bias - mantissa bits)
    constexpr float kUnit = kE4M3 ? 0.001953125f /* 2^-9 */ : 1.52587890625e-05f /* 2^-16 */;
    return bitsFloat(sign | floatBits(static_cast<float>(mantissa) * kUnit));
  }
  return bitsFloat(sign | ((exponent + 127u - Bias) << 23) | (mantissa << (23 - MantissaBits)));
}

/// `value` rounded to the nearest fp8 (ties to even), CUDA's __NV_SATFINITE conversion of a float
/// (__nv_cvt_float_to_fp8; checked against CUDA 13's on every float): magnitudes at or below half
/// the smallest subnormal become zero, those beyond the largest finite value plus half an ulp (and
/// infinities) the largest finite value, every NaN 0x7f (a NaN in both formats).
template <int MantissaBits, int Bias>
TUCCL_DEVICE_INLINE uint8_t floatToFp8(float value) {
  constexpr bool kE4M3 = MantissaBits == 3;
  constexpr uint32_t kLargest = kE4M3 ? 0x7eu : 0x7bu;                     // 448, 57344
  constexpr uint32_t kHalfSmallest = kE4M3 ? 0x3a800000u : 0x37000000u;    // 2^-10, 2^-17 (a tie, to zero)
  constexpr uint32_t kSaturateAbove = kE4M3 ? 0x43e80000u : 0x476fffffu;   // 464; below 61440 (which rounds up)
  constexpr uint32_t kSmallestNormal = kE4M3 ? 0x3c800000u : 0x38800000u;  // 2^-6, 2^-14
  const uint32_t bits = floatBits(value);
  const uint32_t sign = (bits >> 24) & 0x80u;
  const uint32_t absBits = bits & 0x7fffffffu;
  if (absBits > 0x7f800000u) return 0x7fu;  // NaN
  uint32_t result = 0;
  if (absBits <= kHalfSmallest) {
    result = 0;
  } else if (absBits > kSaturateAbove) {
    result = kLargest;
  } else {
    const uint32_t significand = (absBits & 0x7fffffu) | 0x800000u;
    const int32_t exponent = static_cast<int32_t>(absBits >> 23) - 127;
    uint32_t drop = 23u - MantissaBits;  // low bits of the significand the fp8 has no room for
    if (absBits >= kSmallestNormal) {
      result = (static_cast<uint32_t>(exponent + Bias) << MantissaBits) | ((significand >> drop) & ((1u << MantissaBits) - 1u));
    } else {  // a subnormal: the leading one moves into the mantissa
      drop += static_cast<uint32_t>(1 - Bias - exponent);
      result = significand >> drop;
    }
    const uint32_t rest = significand & ((1u << drop) - 1u);
    const uint32_t half = 1u << (drop - 1u);
    if (rest > half || (rest == half && (result & 1u))) ++result;  // a carry moves into the exponent
  }
  return static_cast<uint8_t>(sign | result);
}

TUCCL_DEVICE_INLINE float toFloat(Fp8E4M3 v) { return fp8ToFloat<3, 7>(v.bits); }
TUCCL_DEVICE_INLINE float toFloat(Fp8E5M2 v) { return fp8ToFloat<2, 15>(v.bits); }
TUCCL_DEVICE_INLINE Fp8E4M3 toFp8E4M3(float value) { return Fp8E4M3{floatToFp8<3, 7>(value)}; }
TUCCL_DEVICE_INLINE Fp8E5M2 toFp8E5M2(float value) { return Fp8E5M2{floatToFp8<2, 15>(value)}; }

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
template <typename Op>
struct Combine<Op, Fp8E4M3> {
  // Out of line on the device: the conversions are long, and the loops unroll their calls.
  TUCCL_DEVICE_NOINLINE static Fp8E4M3 apply(Fp8E4M3 a, Fp8E4M3 b) { return toFp8E4M3(Op::apply(toFloat(a), toFloat(b))); }
};
template <typename Op>
struct Combine<Op, Fp8E5M2> {
  TUCCL_DEVICE_NOINLINE static Fp8E5M2 apply(Fp8E5M2 a, Fp8E5M2 b) { return toFp8E5M2(Op::apply(toFloat(a), toFloat(b))); }
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
struct Combine<OpSum, int8_t> {
  TUCCL_DEVICE_INLINE static int8_t apply(int8_t a, int8_t b) { return WrapCombine<uint8_t, int8_t>::apply<OpSum>(a, b); }
};
template <>
struct Combine<OpProd, int8_t> {
  TUCCL_DEVICE_INLINE static int8_t apply(int8_t a, int8_t b) { return WrapCombine<uint8_t, int8_t>::apply<OpProd>(a, b); }
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
    case kInt8:
    case kUint8:
    case kFloat8E4M3:
    case kFloat8E5M2: return 1;
    case kFloat16:
    case kBFloat16: return 2;
    case kInt32:
    case kUint32:
    case kFloat32: return 4;
    case kInt64:
    case kUint64:
    case kFloat64: return 8;
    default: return 0;
  }
}

/// Integers divide in their promoted type (int8 by 200 ranks is not int8 by -56), floats in
/// theirs.
template <typename T>
TUCCL_HOST_DEVICE void divideElements(T* data, int64_t n, int32_t divisor) {
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) data[i] = static_cast<T>(data[i] / divisor);
}

/// A float rounded to a type stored in fewer bits.
template <typename T>
struct FromFloat;
template <>
struct FromFloat<Half> {
  TUCCL_DEVICE_INLINE static Half apply(float v) { return toHalf(v); }
};
template <>
struct FromFloat<BFloat16> {
  TUCCL_DEVICE_INLINE static BFloat16 apply(float v) { return toBFloat16(v); }
};
template <>
struct FromFloat<Fp8E4M3> {
  TUCCL_DEVICE_INLINE static Fp8E4M3 apply(float v) { return toFp8E4M3(v); }
};
template <>
struct FromFloat<Fp8E5M2> {
  TUCCL_DEVICE_INLINE static Fp8E5M2 apply(float v) { return toFp8E5M2(v); }
};

/// divideElements for a type stored in fewer bits than float: divided in float, rounded once.
template <typename T>
TUCCL_HOST_DEVICE void divideInFloat(T* data, int64_t n, int32_t divisor) {
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    data[i] = FromFloat<T>::apply(toFloat(data[i]) / static_cast<float>(divisor));
  }
}

/// data[i] /= divisor (the avg epilogue, after the wrapped sum); integers truncate toward zero,
/// as NCCL's integer avg (a sum, then a division) does.
TUCCL_DEVICE_NOINLINE void divideElements(int32_t dtype, void* data, int64_t n, int32_t divisor) {
  switch (dtype) {
    case kInt8: divideElements(static_cast<int8_t*>(data), n, divisor); break;
    case kUint8: divideElements(static_cast<uint8_t*>(data), n, divisor); break;
    case kInt32: divideElements(static_cast<int32_t*>(data), n, divisor); break;
    case kUint32: divideElements(static_cast<uint32_t*>(data), n, divisor); break;
    case kInt64: divideElements(static_cast<int64_t*>(data), n, divisor); break;
    case kUint64: divideElements(static_cast<uint64_t*>(data), n, divisor); break;
    case kFloat32: divideElements(static_cast<float*>(data), n, divisor); break;
    case kFloat64: divideElements(static_cast<double*>(data), n, divisor); break;
    case kFloat16: divideInFloat<Half>(static_cast<Half*>(data), n, divisor); break;
    case kBFloat16: divideInFloat<BFloat16>(static_cast<BFloat16*>(data), n, divisor); break;
    case kFloat8E4M3: divideInFloat<Fp8E4M3>(static_cast<Fp8E4M3*>(data), n, divisor); break;
    case kFloat8E5M2: divideInFloat<Fp8E5M2>(static_cast<Fp8E5M2*>(data), n, divisor); break;
    default: break;
  }
}

}  // namespace tuccl::dev
