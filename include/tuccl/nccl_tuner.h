// NCCL's tuner plugin ABI, versions v2 (NCCL 2.21) to v7 (the NCCL release after 2.30), defined by
// us.
//
// NCCL does not install these types; a plugin carries its own copy. Field order and types are the
// binary contract (shared/reference/nccl-tuner-abi.md; v7: nccl-api.md, "Tuner v7"). Valid C and C++; only
// plain data and function-pointer types, so a harness written in C can include it too.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// ---- Common types ----------------------------------------------------------------------------------
// nccl.h defines ncclResult_t with the same values; do not define it twice when both are included.
#if !defined(NCCL_H_)
typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;
#endif

#if !defined(NCCL_COMMON_H_)
/// The collective a tuner is asked about; the tuner only ever sees 0..4.
typedef enum {
  ncclFuncBroadcast = 0,
  ncclFuncReduce = 1,
  ncclFuncAllGather = 2,
  ncclFuncReduceScatter = 3,
  ncclFuncAllReduce = 4,
  ncclFuncSendRecv = 5,
  ncclFuncSend = 6,
  ncclFuncRecv = 7,
  ncclNumFuncs = 8
} ncclFunc_t;

typedef enum {
  NCCL_LOG_NONE = 0,
  NCCL_LOG_VERSION = 1,
  NCCL_LOG_WARN = 2,
  NCCL_LOG_INFO = 3,
  NCCL_LOG_ABORT = 4,
  NCCL_LOG_TRACE = 5
} ncclDebugLogLevel;

/// NCCL's logger; `flags` selects the subsystem (NCCL_TUNING for a tuner). May be NULL.
typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                                  const char* fmt, ...);
#endif

/// The tuning subsystem flag of NCCL's logger.
#define TUCCL_NCCL_TUNING_FLAG 0x40UL

// Indices of the cost table (first index: algorithm, second: protocol). NCCL before 2.23 has 6
// algorithms (no PAT); always use the numAlgo / numProto the call passes.
#define TUCCL_NCCL_ALGO_TREE 0
#define TUCCL_NCCL_ALGO_RING 1
#define TUCCL_NCCL_ALGO_COLLNET_DIRECT 2
#define TUCCL_NCCL_ALGO_COLLNET_CHAIN 3
#define TUCCL_NCCL_ALGO_NVLS 4
#define TUCCL_NCCL_ALGO_NVLS_TREE 5
#define TUCCL_NCCL_ALGO_PAT 6
#define TUCCL_NCCL_NUM_ALGORITHMS 7
#define TUCCL_NCCL_PROTO_LL 0
#define TUCCL_NCCL_PROTO_LL128 1
#define TUCCL_NCCL_PROTO_SIMPLE 2
#define TUCCL_NCCL_NUM_PROTOCOLS 3
/// A cost-table entry NCCL marked unsupported or disabled.
#define TUCCL_NCCL_ALGO_PROTO_IGNORE (-1.0f)
/// v2's "not chosen" value of *algorithm / *protocol.
#define TUCCL_NCCL_UNDEF (-1)

// ---- v2 (NCCL 2.21) --------------------------------------------------------------------------------
typedef struct {
  const char* name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void** context);
  /// Outputs plain indices in *algorithm / *protocol; no cost table.
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int collNetSupport,
                              int nvlsSupport, int numPipeOps, int* algorithm, int* protocol, int* nChannels);
  ncclResult_t (*destroy)(void* context);
} ncclTuner_v2_t;

// ---- v3 (NCCL 2.22) --------------------------------------------------------------------------------
typedef struct {
  const char* name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void** context);
  /// collCostTable is a contiguous float[numAlgo][numProto] despite its type.
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int* nChannels);
  ncclResult_t (*destroy)(void* context);
} ncclTuner_v3_t;

// ---- v4 (NCCL 2.24) --------------------------------------------------------------------------------
typedef struct {
  const char* name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void** context);
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int regBuff, int* nChannels);
  ncclResult_t (*destroy)(void* context);
} ncclTuner_v4_t;

// ---- v5 (NCCL 2.28) --------------------------------------------------------------------------------
typedef struct {
  int nNvlDomains;
  int minRanksPerNvlDomain;
  int maxRanksPerNvlDomain;
} ncclNvlDomainInfo_v5_t;

#define TUCCL_NCCL_NUM_HW_LINKS 3       // NVLINK 0, PCI 1, NET 2
#define TUCCL_NCCL_NUM_COMPCAPS 4       // Volta 0, Ampere 1, Hopper 2, Blackwell 3
#define TUCCL_NCCL_NUM_TUNING_SCALES 3  // 1 node, 2 nodes, 4+ nodes

/// NCCL's cost-model constants, filled with NCCL's defaults before init; edits change its model.
typedef struct {
  double baseLatencies[TUCCL_NCCL_NUM_ALGORITHMS][TUCCL_NCCL_NUM_PROTOCOLS];
  double hwLatencies[TUCCL_NCCL_NUM_HW_LINKS][TUCCL_NCCL_NUM_ALGORITHMS][TUCCL_NCCL_NUM_PROTOCOLS];
  double llMaxBws[TUCCL_NCCL_NUM_COMPCAPS][TUCCL_NCCL_NUM_TUNING_SCALES];
  double perChMaxRingLL128Bws[TUCCL_NCCL_NUM_COMPCAPS][TUCCL_NCCL_NUM_TUNING_SCALES];
  double perChMaxTreeLL128Bws[TUCCL_NCCL_NUM_COMPCAPS][TUCCL_NCCL_NUM_TUNING_SCALES];
  double perChMaxTreeBws[TUCCL_NCCL_NUM_COMPCAPS][TUCCL_NCCL_NUM_TUNING_SCALES];
  double perChMaxNVLSTreeBws[TUCCL_NCCL_NUM_COMPCAPS][TUCCL_NCCL_NUM_TUNING_SCALES];
} ncclTunerConstants_v5_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t commId, size_t nRanks, size_t nNodes,
                       ncclDebugLogger_t logFunction, ncclNvlDomainInfo_v5_t* nvlDomainInfo,
                       ncclTunerConstants_v5_t* constants);
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int regBuff, int* nChannels);
  ncclResult_t (*finalize)(void* context);
} ncclTuner_v5_t;

// ---- v6 (NCCL 2.30) --------------------------------------------------------------------------------
typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t commId, size_t nRanks, size_t nNodes,
                       ncclDebugLogger_t logFunction, ncclNvlDomainInfo_v5_t* nvlDomainInfo,
                       ncclTunerConstants_v5_t* constants);
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int regBuff, int* nChannels);
  ncclResult_t (*finalize)(void* context);
  /// May be NULL. NCCL clamps the value to its buffer limits and rounds down to the protocol grain.
  ncclResult_t (*getChunkSize)(void* context, ncclFunc_t collType, size_t nBytes, int algorithm, int protocol,
                               int nChannels, size_t* chunkSize);
} ncclTuner_v6_t;

// ---- v7 (NVIDIA/nccl 2449986f, after 2.30) -------------------------------------------------------
// v6's five entries; only the constants struct changed: a fifth compute-capability row (RUBIN) in
// every bandwidth array, so each array after llMaxBws starts at a different offset than in v5.
typedef ncclNvlDomainInfo_v5_t ncclNvlDomainInfo_v7_t;

#define TUCCL_NCCL_NUM_COMPCAPS_V7 5  // Volta 0, Ampere 1, Hopper 2, Blackwell 3, Rubin 4

typedef struct {
  double baseLatencies[TUCCL_NCCL_NUM_ALGORITHMS][TUCCL_NCCL_NUM_PROTOCOLS];
  double hwLatencies[TUCCL_NCCL_NUM_HW_LINKS][TUCCL_NCCL_NUM_ALGORITHMS][TUCCL_NCCL_NUM_PROTOCOLS];
  double llMaxBws[TUCCL_NCCL_NUM_COMPCAPS_V7][TUCCL_NCCL_NUM_TUNING_SCALES];
  double perChMaxRingLL128Bws[TUCCL_NCCL_NUM_COMPCAPS_V7][TUCCL_NCCL_NUM_TUNING_SCALES];
  double perChMaxTreeLL128Bws[TUCCL_NCCL_NUM_COMPCAPS_V7][TUCCL_NCCL_NUM_TUNING_SCALES];
  double perChMaxTreeBws[TUCCL_NCCL_NUM_COMPCAPS_V7][TUCCL_NCCL_NUM_TUNING_SCALES];
  double perChMaxNVLSTreeBws[TUCCL_NCCL_NUM_COMPCAPS_V7][TUCCL_NCCL_NUM_TUNING_SCALES];
} ncclTunerConstants_v7_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t commId, size_t nRanks, size_t nNodes,
                       ncclDebugLogger_t logFunction, ncclNvlDomainInfo_v7_t* nvlDomainInfo,
                       ncclTunerConstants_v7_t* constants);
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int regBuff, int* nChannels);
  ncclResult_t (*finalize)(void* context);
  /// May be NULL. NCCL clamps the value to its buffer limits and rounds down to the protocol grain.
  ncclResult_t (*getChunkSize)(void* context, ncclFunc_t collType, size_t nBytes, int algorithm, int protocol,
                               int nChannels, size_t* chunkSize);
} ncclTuner_v7_t;

#ifdef __cplusplus
}  // extern "C"
#endif
