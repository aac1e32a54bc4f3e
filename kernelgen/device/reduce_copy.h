// The data loops of the primitives: copy a slice to one or two destinations, or reduce one or
// two sources into one or two destinations, with the threads of a TB (docs/kernels.md, "Data
// loops"; NCCL's reduceCopyPacks, shared/reference/nccl-data-path.md §3).
//
// Device:
//   - Every thread keeps kUnroll independent 16-byte loads per source in flight before its first
//     store (NCCL's COLL_UNROLL, 8 on sm80..sm10x). Element u of a thread's batch sits u * blockDim.x
//     packs from its first, so one warp instruction covers 512 contiguous bytes.
//   - Loads are ld.volatile.global (NCCL's choice: they bypass L1, so data another GPU, process or
//     TB wrote behind a flag is never read stale), stores plain st.global; the pointers are
//     converted to the global window once per loop, so nothing is generic and nothing may alias.
//   - 16-byte packs whenever every pointer has the same address mod 16 (a head of at most 15
//     bytes first); otherwise copies use the widest word (8, 4, 2) the pointers share and
//     reductions whole elements, unrolled alike. Bytes are moved one at a time only in heads and
//     tails shorter than a word, or when the pointers share no alignment at all.
//   - fp16 / bf16 sums and products use the packed f16x2 / bf16x2 instructions, the other
//     operations float conversions by cvt (datatypes.h); fp8 converts element by element with
//     datatypes.h's integer code, on both sides.
// Host: a TB is one thread; copies are memcpy, reductions one pass over the elements in 16-byte
// vectors (hostVectorLoop: the host kernels are built at -O1, where the compiler's vectoriser does
// not run, and a scalar loop reduced a third as fast) for the integer and 32/64-bit float types,
// element by element for the 16- and 8-bit floats. Both sides compute bit-identical results.
#pragma once

#include "datatypes.h"
#include "kernel_args.h"
#include "tuccl_device.h"

namespace tuccl::dev {

/// Independent 16-byte loads per thread and source before the first store (NCCL COLL_UNROLL for
/// sm80..sm10x, src/include/device.h ncclCollUnroll).
inline constexpr int kUnroll = 8;

/// 16 bytes moved by one vector load or store (ld/st.global.v4.u32 on the device).
#if defined(TUCCL_DEVICE_COMPILE)
typedef uint4 Pack16;
#else
struct alignas(16) Pack16 {
  uint32_t x, y, z, w;
};
#endif

template <typename T>
TUCCL_DEVICE_INLINE T minOf(T a, T b) {
  return a < b ? a : b;
}

template <int32_t D>
struct TypeOf;
template <>
struct TypeOf<kInt8> { typedef int8_t type; };
template <>
struct TypeOf<kUint8> { typedef uint8_t type; };
template <>
struct TypeOf<kUint32> { typedef uint32_t type; };
template <>
struct TypeOf<kUint64> { typedef uint64_t type; };
template <>
struct TypeOf<kFloat8E4M3> { typedef Fp8E4M3 type; };
template <>
struct TypeOf<kFloat8E5M2> { typedef Fp8E5M2 type; };
template <>
struct TypeOf<kInt32> { typedef int32_t type; };
template <>
struct TypeOf<kInt64> { typedef int64_t type; };
template <>
struct TypeOf<kFloat16> { typedef Half type; };
template <>
struct TypeOf<kBFloat16> { typedef BFloat16 type; };
template <>
struct TypeOf<kFloat32> { typedef float type; };
template <>
struct TypeOf<kFloat64> { typedef double type; };

/// A copy: the data loops' "operation" when there is one source (never combines anything).
struct OpCopy {
  template <typename T>
  TUCCL_DEVICE_INLINE static T apply(T a, T) { return a; }
};

/// a op= b, element by element, over one 16-byte pack of T.
template <typename T, typename Op>
struct PackCombine {
  TUCCL_DEVICE_INLINE static Pack16 apply(Pack16 a, Pack16 b) {
    constexpr int kPer = 16 / static_cast<int>(sizeof(T));
    union {
      Pack16 pack;
      T elems[kPer];
    } x, y;
    x.pack = a;
    y.pack = b;
#if defined(TUCCL_DEVICE_COMPILE)
#pragma unroll
#endif
    for (int e = 0; e < kPer; ++e) x.elems[e] = Combine<Op, T>::apply(x.elems[e], y.elems[e]);
    return x.pack;
  }
};

/// fp8: a pack's 16 conversions as one function per format and operation, out of line on the
/// device, so the loops that unroll their pack combines call it instead of holding 16 copies of
/// the conversions per combine (which made every generic kernel several times slower to compile).
template <typename T, typename Op>
struct Fp8PackCombine {
  TUCCL_DEVICE_NOINLINE static Pack16 apply(Pack16 a, Pack16 b) {
    union {
      Pack16 pack;
      T elems[16];
    } x, y;
    x.pack = a;
    y.pack = b;
    for (int e = 0; e < 16; ++e) x.elems[e] = FromFloat<T>::apply(Op::apply(toFloat(x.elems[e]), toFloat(y.elems[e])));
    return x.pack;
  }
};
template <typename Op>
struct PackCombine<Fp8E4M3, Op> : Fp8PackCombine<Fp8E4M3, Op> {};
template <typename Op>
struct PackCombine<Fp8E5M2, Op> : Fp8PackCombine<Fp8E5M2, Op> {};

#if defined(TUCCL_DEVICE_COMPILE)
/// Packed 16-bit float arithmetic: each instruction rounds once, as the float path does.
struct F16x2 {
  TUCCL_DEVICE_INLINE static uint32_t add(uint32_t a, uint32_t b) {
    uint32_t d;
    asm("add.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
  }
  TUCCL_DEVICE_INLINE static uint32_t mul(uint32_t a, uint32_t b) {
    uint32_t d;
    asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
  }
};
#if __CUDA_ARCH__ >= 800
struct Bf16x2 {
  // sm_80 has bf16x2 only as fma: a + b = fma(a, 1, b), a * b = fma(a, b, -0).
  TUCCL_DEVICE_INLINE static uint32_t fma(uint32_t a, uint32_t b, uint32_t c) {
    uint32_t d;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
  }
  TUCCL_DEVICE_INLINE static uint32_t add(uint32_t a, uint32_t b) { return fma(a, 0x3f803f80u, b); }
  TUCCL_DEVICE_INLINE static uint32_t mul(uint32_t a, uint32_t b) { return fma(a, b, 0x80008000u); }
};
#endif

template <typename Lanes, bool Sum>
struct PackedCombine {
  TUCCL_DEVICE_INLINE static Pack16 apply(Pack16 a, Pack16 b) {
    Pack16 r;
    r.x = Sum ? Lanes::add(a.x, b.x) : Lanes::mul(a.x, b.x);
    r.y = Sum ? Lanes::add(a.y, b.y) : Lanes::mul(a.y, b.y);
    r.z = Sum ? Lanes::add(a.z, b.z) : Lanes::mul(a.z, b.z);
    r.w = Sum ? Lanes::add(a.w, b.w) : Lanes::mul(a.w, b.w);
    return r;
  }
};
template <>
struct PackCombine<Half, OpSum> : PackedCombine<F16x2, true> {};
template <>
struct PackCombine<Half, OpProd> : PackedCombine<F16x2, false> {};
#if __CUDA_ARCH__ >= 800
template <>
struct PackCombine<BFloat16, OpSum> : PackedCombine<Bf16x2, true> {};
template <>
struct PackCombine<BFloat16, OpProd> : PackedCombine<Bf16x2, false> {};
#endif

// ---- Global memory, device ----------------------------------------------------------------------

/// The address of p in the global window (every buffer the kernels touch is global memory).
TUCCL_DEVICE_INLINE uint64_t globalAddress(const void* p) {
  uint64_t g;
  asm("cvta.to.global.u64 %0, %1;" : "=l"(g) : "l"(p));
  return g;
}

TUCCL_DEVICE_INLINE Pack16 loadPack(uint64_t at) {
  Pack16 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(at)
               : "memory");
  return v;
}
TUCCL_DEVICE_INLINE void storePack(uint64_t at, Pack16 v) {
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(at), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

/// A word of W bytes (8, 4, 2, 1): the unit of copies whose pointers are not 16-byte compatible.
/// Loaded like the packs (ld.volatile.global) into a register of type T (constraint C; PTX has no
/// 8-bit registers, so bytes travel in 16-bit ones).
template <int W>
struct Word;
#define TUCCL_GLOBAL_WORD(W, T, BITS, C)                                                         \
  template <>                                                                                   \
  struct Word<W> {                                                                              \
    typedef T type;                                                                             \
    TUCCL_DEVICE_INLINE static type load(uint64_t at) {                                         \
      type v;                                                                                   \
      asm volatile("ld.volatile.global.u" #BITS " %0, [%1];" : "=" C(v) : "l"(at) : "memory"); \
      return v;                                                                                 \
    }                                                                                           \
    TUCCL_DEVICE_INLINE static void store(uint64_t at, type v) {                                \
      asm volatile("st.global.u" #BITS " [%0], %1;" ::"l"(at), C(v) : "memory");               \
    }                                                                                           \
  };
TUCCL_GLOBAL_WORD(8, uint64_t, 64, "l")
TUCCL_GLOBAL_WORD(4, uint32_t, 32, "r")
TUCCL_GLOBAL_WORD(2, uint16_t, 16, "h")
TUCCL_GLOBAL_WORD(1, uint16_t, 8, "h")
#undef TUCCL_GLOBAL_WORD

/// The packs [0, packs) of every source, combined with Op (a copy: the one source), stored to
/// every destination: kUnroll loads per source in flight per thread, then the stores.
template <typename T, typename Op, int NSRC, int NDST>
TUCCL_DEVICE_INLINE void packLoop(const uint64_t (&src)[NSRC], const uint64_t (&dst)[NDST], int64_t packs) {
  const int64_t nt = blockDim.x;
  int64_t p = threadIdx.x;
  for (; p + (kUnroll - 1) * nt < packs; p += kUnroll * nt) {
    Pack16 acc[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc[u] = loadPack(src[0] + static_cast<uint64_t>(p + u * nt) * 16);
#pragma unroll
    for (int s = 1; s < NSRC; ++s) {
      Pack16 in[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) in[u] = loadPack(src[s] + static_cast<uint64_t>(p + u * nt) * 16);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) acc[u] = PackCombine<T, Op>::apply(acc[u], in[u]);
    }
#pragma unroll
    for (int d = 0; d < NDST; ++d) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) storePack(dst[d] + static_cast<uint64_t>(p + u * nt) * 16, acc[u]);
    }
  }
  for (; p < packs; p += nt) {
    Pack16 acc = loadPack(src[0] + static_cast<uint64_t>(p) * 16);
#pragma unroll
    for (int s = 1; s < NSRC; ++s) acc = PackCombine<T, Op>::apply(acc, loadPack(src[s] + static_cast<uint64_t>(p) * 16));
#pragma unroll
    for (int d = 0; d < NDST; ++d) storePack(dst[d] + static_cast<uint64_t>(p) * 16, acc);
  }
}

/// Words [0, n) of W bytes from one source to every destination, unrolled like packLoop.
template <int W, int NDST>
TUCCL_DEVICE_INLINE void wordLoop(uint64_t src, const uint64_t (&dst)[NDST], int64_t n, int64_t first, int64_t step) {
  typedef typename Word<W>::type V;
  int64_t i = first;
  for (; i + (kUnroll - 1) * step < n; i += kUnroll * step) {
    V v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = Word<W>::load(src + static_cast<uint64_t>(i + u * step) * W);
#pragma unroll
    for (int d = 0; d < NDST; ++d) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) Word<W>::store(dst[d] + static_cast<uint64_t>(i + u * step) * W, v[u]);
    }
  }
  for (; i < n; i += step) {
    const V v = Word<W>::load(src + static_cast<uint64_t>(i) * W);
#pragma unroll
    for (int d = 0; d < NDST; ++d) Word<W>::store(dst[d] + static_cast<uint64_t>(i) * W, v);
  }
}

/// Elements [begin, end) of T, combined and stored one at a time by each thread, unrolled.
template <typename T, typename Op, int NSRC, int NDST>
TUCCL_DEVICE_INLINE void elementLoop(const T* const* src, T* const* dst, int64_t begin, int64_t end) {
  const int64_t nt = blockDim.x;
  int64_t i = begin + threadIdx.x;
  for (; i + (kUnroll - 1) * nt < end; i += kUnroll * nt) {
    T acc[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc[u] = src[0][i + u * nt];
#pragma unroll
    for (int s = 1; s < NSRC; ++s) {
      T in[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) in[u] = src[s][i + u * nt];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) acc[u] = Combine<Op, T>::apply(acc[u], in[u]);
    }
#pragma unroll
    for (int d = 0; d < NDST; ++d) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) dst[d][i + u * nt] = acc[u];
    }
  }
  for (; i < end; i += nt) {
    T acc = src[0][i];
#pragma unroll
    for (int s = 1; s < NSRC; ++s) acc = Combine<Op, T>::apply(acc, src[s][i]);
#pragma unroll
    for (int d = 0; d < NDST; ++d) dst[d][i] = acc;
  }
}

/// Elements [begin, end) of T, one at a time per thread, not unrolled: the head and tail of an
/// aligned range, under 16 bytes each (unrolling them would only grow the code, whose size sets
/// the kernels' compile time).
template <typename T, typename Op, int NSRC, int NDST>
TUCCL_DEVICE_INLINE void elementEnds(const T* const* src, T* const* dst, int64_t begin, int64_t end) {
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    T acc = src[0][i];
#pragma unroll
    for (int s = 1; s < NSRC; ++s) acc = Combine<Op, T>::apply(acc, src[s][i]);
#pragma unroll
    for (int d = 0; d < NDST; ++d) dst[d][i] = acc;
  }
}
#endif  // TUCCL_DEVICE_COMPILE

/// The datatypes whose mutually misaligned ranges get the unrolled element loop: those training
/// reduces; int8, uint32, uint64 and fp8 take one element at a time there (their aligned packs
/// still keep 8 loads in flight).
template <typename T>
inline constexpr bool kUnrolledMisaligned = false;
template <>
inline constexpr bool kUnrolledMisaligned<float> = true;
template <>
inline constexpr bool kUnrolledMisaligned<double> = true;
template <>
inline constexpr bool kUnrolledMisaligned<Half> = true;
template <>
inline constexpr bool kUnrolledMisaligned<BFloat16> = true;
template <>
inline constexpr bool kUnrolledMisaligned<int32_t> = true;
template <>
inline constexpr bool kUnrolledMisaligned<int64_t> = true;
template <>
inline constexpr bool kUnrolledMisaligned<uint8_t> = true;

// ---- The host's vector loop ------------------------------------------------------------------------

#if !defined(TUCCL_DEVICE_COMPILE)
/// The lane type the host computes T's Op in: signed integers add and multiply as unsigned,
/// wrapping as Combine does; everything else as itself.
template <typename T, typename Op, bool = std::is_integral_v<T> && (std::is_same_v<Op, OpSum> || std::is_same_v<Op, OpProd>)>
struct HostLane {
  using type = T;
};
template <typename T, typename Op>
struct HostLane<T, Op, true> {
  using type = std::make_unsigned_t<T>;
};

/// The host build's 16-byte vector of T for Op (GCC/Clang vector extensions: SIMD at the -O1 the
/// host kernels are built with, where the loop vectoriser does not run): kLanes elements per
/// vector, 0 where the element loop serves (16-bit and 8-bit floats). Every lane computes what
/// Combine computes, so the results stay bit-identical to the device's.
template <typename T, typename Op, typename = void>
struct HostVector {
  static constexpr int kLanes = 0;
};
template <typename T, typename Op>
struct HostVector<T, Op, std::enable_if_t<std::is_arithmetic_v<T>>> {
  typedef typename HostLane<T, Op>::type Vector __attribute__((vector_size(16)));
  static constexpr int kLanes = 16 / sizeof(T);
  static Vector load(const T* p) {
    Vector v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static Vector apply(Vector a, Vector b) {
    if constexpr (std::is_same_v<Op, OpSum>) {
      return a + b;
    } else if constexpr (std::is_same_v<Op, OpProd>) {
      return a * b;
    } else if constexpr (std::is_same_v<Op, OpMin>) {
      return b < a ? b : a;
    } else {
      static_assert(std::is_same_v<Op, OpMax>, "a reduction the host has no vector form of");
      return a < b ? b : a;
    }
  }
};

/// dst[d][i] = src[0][i] op src[1][i] ... over the whole pairs of vectors of n elements (two in
/// flight per iteration); returns how many elements were done.
template <typename T, typename Op, int NSRC, int NDST>
inline int64_t hostVectorLoop(const T* const* src, T* const* dst, int64_t n) {
  using V = HostVector<T, Op>;
  constexpr int64_t kStep = 2 * V::kLanes;
  int64_t i = 0;
  for (; i + kStep <= n; i += kStep) {
    typename V::Vector a = V::load(src[0] + i);
    typename V::Vector b = V::load(src[0] + i + V::kLanes);
    for (int s = 1; s < NSRC; ++s) {
      a = V::apply(a, V::load(src[s] + i));
      b = V::apply(b, V::load(src[s] + i + V::kLanes));
    }
    for (int d = 0; d < NDST; ++d) {
      std::memcpy(dst[d] + i, &a, sizeof a);
      std::memcpy(dst[d] + i + V::kLanes, &b, sizeof b);
    }
  }
  return i;
}
#endif

// ---- The loops ------------------------------------------------------------------------------------

/// dst[d][i] = src[0][i] op src[1][i] ... for i < n elements of T, every destination.
template <typename T, typename Op, int NSRC, int NDST>
TUCCL_DEVICE_INLINE void reduceCopyT(const T* const* src, T* const* dst, int64_t n) {
#if defined(TUCCL_DEVICE_COMPILE)
  constexpr int64_t kPer = 16 / static_cast<int64_t>(sizeof(T));
  const uint64_t mis = reinterpret_cast<uintptr_t>(dst[0]) & 15u;
  bool together = mis % sizeof(T) == 0;
#pragma unroll
  for (int s = 0; s < NSRC; ++s) together = together && (reinterpret_cast<uintptr_t>(src[s]) & 15u) == mis;
#pragma unroll
  for (int d = 0; d < NDST; ++d) together = together && (reinterpret_cast<uintptr_t>(dst[d]) & 15u) == mis;
  if (!together) {
    // Mutually misaligned buffers: unrolled for the datatypes training reduces (8 loads in flight),
    // one element at a time for the rarer ones, to keep the kernels' code (and compile time) down.
    if constexpr (kUnrolledMisaligned<T>) {
      elementLoop<T, Op, NSRC, NDST>(src, dst, 0, n);
    } else {
      elementEnds<T, Op, NSRC, NDST>(src, dst, 0, n);
    }
    return;
  }
  const int64_t head = minOf<int64_t>(n, static_cast<int64_t>(((16u - mis) & 15u) / sizeof(T)));
  const int64_t packs = (n - head) / kPer;
  if (head > 0) elementEnds<T, Op, NSRC, NDST>(src, dst, 0, head);
  uint64_t gs[NSRC];
  uint64_t gd[NDST];
#pragma unroll
  for (int s = 0; s < NSRC; ++s) gs[s] = globalAddress(src[s] + head);
#pragma unroll
  for (int d = 0; d < NDST; ++d) gd[d] = globalAddress(dst[d] + head);
  packLoop<T, Op, NSRC, NDST>(gs, gd, packs);
  if (head + packs * kPer < n) elementEnds<T, Op, NSRC, NDST>(src, dst, head + packs * kPer, n);
#else
  int64_t i = 0;
  if constexpr (HostVector<T, Op>::kLanes > 0) i = hostVectorLoop<T, Op, NSRC, NDST>(src, dst, n);
  for (; i < n; ++i) {
    T acc = src[0][i];
    for (int s = 1; s < NSRC; ++s) acc = Combine<Op, T>::apply(acc, src[s][i]);
    for (int d = 0; d < NDST; ++d) dst[d][i] = acc;
  }
#endif
}

/// Copies n bytes from src to every destination with the threads of the TB.
template <int NDST>
TUCCL_DEVICE_INLINE void copyBytesT(const char* src, char* const (&dst)[NDST], int64_t n) {
#if defined(TUCCL_DEVICE_COMPILE)
  // The widest word every pointer shares its address with, mod the word.
  uintptr_t differ = 0;
#pragma unroll
  for (int d = 0; d < NDST; ++d) differ |= reinterpret_cast<uintptr_t>(dst[d]) ^ reinterpret_cast<uintptr_t>(src);
  const int w = (differ & 15u) == 0 ? 16 : (differ & 7u) == 0 ? 8 : (differ & 3u) == 0 ? 4 : (differ & 1u) == 0 ? 2 : 1;
  const int64_t head = minOf<int64_t>(n, static_cast<int64_t>((w - (reinterpret_cast<uintptr_t>(src) & (w - 1))) & (w - 1)));
  const int64_t words = (n - head) / w;
  const int64_t tail = head + words * w;
  for (int64_t i = threadIdx.x; i < head; i += blockDim.x) {
#pragma unroll
    for (int d = 0; d < NDST; ++d) dst[d][i] = src[i];
  }
  const uint64_t gs = globalAddress(src + head);
  uint64_t gd[NDST];
#pragma unroll
  for (int d = 0; d < NDST; ++d) gd[d] = globalAddress(dst[d] + head);
  switch (w) {
    case 16: {
      const uint64_t one[1] = {gs};
      packLoop<uint8_t, OpCopy, 1, NDST>(one, gd, words);
      break;
    }
    case 8: wordLoop<8, NDST>(gs, gd, words, threadIdx.x, blockDim.x); break;
    case 4: wordLoop<4, NDST>(gs, gd, words, threadIdx.x, blockDim.x); break;
    case 2: wordLoop<2, NDST>(gs, gd, words, threadIdx.x, blockDim.x); break;
    default: wordLoop<1, NDST>(gs, gd, words, threadIdx.x, blockDim.x); break;
  }
  for (int64_t i = tail + threadIdx.x; i < n; i += blockDim.x) {
#pragma unroll
    for (int d = 0; d < NDST; ++d) dst[d][i] = src[i];
  }
#else
  if (n <= 0) return;
  for (int d = 0; d < NDST; ++d) {
    if (dst[d] != src) std::memmove(dst[d], src, static_cast<size_t>(n));
  }
#endif
}

/// Copies n bytes (a TB's threads); 16-byte packs when the pointers agree mod 16.
TUCCL_DEVICE_INLINE void copyBytes(char* dst, const char* src, int64_t n) {
  char* const d[1] = {dst};
  copyBytesT<1>(src, d, n);
}

template <typename T, int NSRC, int NDST>
TUCCL_DEVICE_INLINE void reduceCopyOp(int32_t op, const void* s0, const void* s1, void* d0, void* d1, int64_t n) {
  const T* const srcs[2] = {static_cast<const T*>(s0), static_cast<const T*>(s1)};
  T* const dsts[2] = {static_cast<T*>(d0), static_cast<T*>(d1)};
#if defined(TUCCL_ONLY_OP)
  (void)op;
  op = TUCCL_ONLY_OP;
#endif
  switch (op) {
    case kProd: reduceCopyT<T, OpProd, NSRC, NDST>(srcs, dsts, n); break;
    case kMin: reduceCopyT<T, OpMin, NSRC, NDST>(srcs, dsts, n); break;
    case kMax: reduceCopyT<T, OpMax, NSRC, NDST>(srcs, dsts, n); break;
    default: reduceCopyT<T, OpSum, NSRC, NDST>(srcs, dsts, n); break;  // kSum, kAvg
  }
}

template <int NDST>
TUCCL_DEVICE_INLINE void reduceCopyType(int32_t dtype, int32_t op, const void* s0, const void* s1, void* d0, void* d1,
                                        int64_t n) {
#if defined(TUCCL_ONLY_DTYPE)
  (void)dtype;
  reduceCopyOp<typename TypeOf<TUCCL_ONLY_DTYPE>::type, 2, NDST>(op, s0, s1, d0, d1, n);
#else
  switch (dtype) {
    case kInt8: reduceCopyOp<int8_t, 2, NDST>(op, s0, s1, d0, d1, n); break;
    case kUint8: reduceCopyOp<uint8_t, 2, NDST>(op, s0, s1, d0, d1, n); break;
    case kInt32: reduceCopyOp<int32_t, 2, NDST>(op, s0, s1, d0, d1, n); break;
    case kUint32: reduceCopyOp<uint32_t, 2, NDST>(op, s0, s1, d0, d1, n); break;
    case kInt64: reduceCopyOp<int64_t, 2, NDST>(op, s0, s1, d0, d1, n); break;
    case kUint64: reduceCopyOp<uint64_t, 2, NDST>(op, s0, s1, d0, d1, n); break;
    case kFloat16: reduceCopyOp<Half, 2, NDST>(op, s0, s1, d0, d1, n); break;
    case kBFloat16: reduceCopyOp<BFloat16, 2, NDST>(op, s0, s1, d0, d1, n); break;
    case kFloat32: reduceCopyOp<float, 2, NDST>(op, s0, s1, d0, d1, n); break;
    case kFloat64: reduceCopyOp<double, 2, NDST>(op, s0, s1, d0, d1, n); break;
    case kFloat8E4M3: reduceCopyOp<Fp8E4M3, 2, NDST>(op, s0, s1, d0, d1, n); break;
    case kFloat8E5M2: reduceCopyOp<Fp8E5M2, 2, NDST>(op, s0, s1, d0, d1, n); break;
    default: break;
  }
#endif
}

/// The data loop of every primitive: n elements of `dtype` from one source (a copy) or two (a
/// reduction, s0 op s1) into d0 and, when not null, d1. One out-of-line copy per kernel.
TUCCL_DEVICE_NOINLINE void reduceCopy(int32_t dtype, int32_t op, const void* s0, const void* s1, void* d0, void* d1,
                                      int64_t n) {
  const int64_t bytes = n * elementSize(dtype);
  if (s1 == nullptr) {
    if (d1 == nullptr) {
      char* const dst[1] = {static_cast<char*>(d0)};
      copyBytesT<1>(static_cast<const char*>(s0), dst, bytes);
    } else {
      char* const dst[2] = {static_cast<char*>(d0), static_cast<char*>(d1)};
      copyBytesT<2>(static_cast<const char*>(s0), dst, bytes);
    }
    return;
  }
  if (d1 == nullptr) {
    reduceCopyType<1>(dtype, op, s0, s1, d0, d1, n);
  } else {
    reduceCopyType<2>(dtype, op, s0, s1, d0, d1, n);
  }
}

/// dst[i] = src[i] * scalar for the elements [0, n) of T, by the threads of the TB (PreMulSum's
/// scaling: integers wrap, 16-bit and fp8 floats multiply in float and round once, as NCCL's
/// __hmul does).
template <typename T>
TUCCL_DEVICE_INLINE void scaleElementsT(void* dst, const void* src, int64_t n, const void* scalar) {
  const T s = *static_cast<const T*>(scalar);
  T* const d = static_cast<T*>(dst);
  const T* const in = static_cast<const T*>(src);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) d[i] = Combine<OpProd, T>::apply(in[i], s);
}

/// dst[i] = src[i] * (*scalar) over n elements of `dtype` (KernelArgs::preScale; src may be dst).
TUCCL_DEVICE_NOINLINE void scaleElements(int32_t dtype, void* dst, const void* src, int64_t n, const void* scalar) {
#if defined(TUCCL_ONLY_DTYPE)
  (void)dtype;
  scaleElementsT<typename TypeOf<TUCCL_ONLY_DTYPE>::type>(dst, src, n, scalar);
#else
  switch (dtype) {
    case kInt8: scaleElementsT<int8_t>(dst, src, n, scalar); break;
    case kUint8: scaleElementsT<uint8_t>(dst, src, n, scalar); break;
    case kInt32: scaleElementsT<int32_t>(dst, src, n, scalar); break;
    case kUint32: scaleElementsT<uint32_t>(dst, src, n, scalar); break;
    case kInt64: scaleElementsT<int64_t>(dst, src, n, scalar); break;
    case kUint64: scaleElementsT<uint64_t>(dst, src, n, scalar); break;
    case kFloat16: scaleElementsT<Half>(dst, src, n, scalar); break;
    case kBFloat16: scaleElementsT<BFloat16>(dst, src, n, scalar); break;
    case kFloat32: scaleElementsT<float>(dst, src, n, scalar); break;
    case kFloat64: scaleElementsT<double>(dst, src, n, scalar); break;
    case kFloat8E4M3: scaleElementsT<Fp8E4M3>(dst, src, n, scalar); break;
    case kFloat8E5M2: scaleElementsT<Fp8E5M2>(dst, src, n, scalar); break;
    default: break;
  }
#endif
}

/// dst op= src over n elements of T, where src is this TB's shared memory (the LL / LL128 bounce
/// buffer): src read with generic loads (a global-window load of a shared address faults with
/// CUDA_ERROR_INVALID_ADDRESS_SPACE), dst with the global ones; 16-byte packs when dst is
/// 16-byte aligned, else one element at a time.
template <typename T, typename Op>
TUCCL_DEVICE_INLINE void reduceFromSharedT(T* dst, const T* src, int64_t n) {
#if defined(TUCCL_DEVICE_COMPILE)
  constexpr int64_t kPer = 16 / static_cast<int64_t>(sizeof(T));
  int64_t done = 0;
  if (((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src)) & 15u) == 0) {
    const int64_t packs = n / kPer;
    const uint64_t gd = globalAddress(dst);
    const Pack16* in = reinterpret_cast<const Pack16*>(src);
    for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
      const uint64_t at = gd + static_cast<uint64_t>(p) * 16;
      storePack(at, PackCombine<T, Op>::apply(loadPack(at), in[p]));
    }
    done = packs * kPer;
  }
  const T* const srcs[2] = {dst, src};
  T* const dsts[1] = {dst};
  elementLoop<T, Op, 2, 1>(srcs, dsts, done, n);
#else
  for (int64_t i = 0; i < n; ++i) dst[i] = Combine<Op, T>::apply(dst[i], src[i]);
#endif
}

template <typename T>
TUCCL_DEVICE_INLINE void reduceFromSharedOp(int32_t op, void* dst, const void* src, int64_t n) {
#if defined(TUCCL_ONLY_OP)
  (void)op;
  op = TUCCL_ONLY_OP;
#endif
  T* const d = static_cast<T*>(dst);
  const T* const s = static_cast<const T*>(src);
  switch (op) {
    case kProd: reduceFromSharedT<T, OpProd>(d, s, n); break;
    case kMin: reduceFromSharedT<T, OpMin>(d, s, n); break;
    case kMax: reduceFromSharedT<T, OpMax>(d, s, n); break;
    default: reduceFromSharedT<T, OpSum>(d, s, n); break;  // kSum, kAvg
  }
}

/// dst op= src over n elements of a runtime datatype and operation (one switch per slice), src
/// in the TB's shared memory (reduceFromSharedT). Compiling with -DTUCCL_ONLY_DTYPE=<DataType>
/// (and -DTUCCL_ONLY_OP=<RedOp>) specialises the kernel to one datatype (and operation), as a
/// runtime that compiles per call configuration would: smaller code, faster NVRTC.
TUCCL_DEVICE_NOINLINE void reduceFromShared(int32_t dtype, int32_t op, void* dst, const void* src, int64_t n) {
#if defined(TUCCL_ONLY_DTYPE)
  (void)dtype;
  reduceFromSharedOp<typename TypeOf<TUCCL_ONLY_DTYPE>::type>(op, dst, src, n);
#else
  switch (dtype) {
    case kInt8: reduceFromSharedOp<int8_t>(op, dst, src, n); break;
    case kUint8: reduceFromSharedOp<uint8_t>(op, dst, src, n); break;
    case kInt32: reduceFromSharedOp<int32_t>(op, dst, src, n); break;
    case kUint32: reduceFromSharedOp<uint32_t>(op, dst, src, n); break;
    case kInt64: reduceFromSharedOp<int64_t>(op, dst, src, n); break;
    case kUint64: reduceFromSharedOp<uint64_t>(op, dst, src, n); break;
    case kFloat16: reduceFromSharedOp<Half>(op, dst, src, n); break;
    case kBFloat16: reduceFromSharedOp<BFloat16>(op, dst, src, n); break;
    case kFloat32: reduceFromSharedOp<float>(op, dst, src, n); break;
    case kFloat64: reduceFromSharedOp<double>(op, dst, src, n); break;
    case kFloat8E4M3: reduceFromSharedOp<Fp8E4M3>(op, dst, src, n); break;
    case kFloat8E5M2: reduceFromSharedOp<Fp8E5M2>(op, dst, src, n); break;
    default: break;
  }
#endif
}

}  // namespace tuccl::dev
