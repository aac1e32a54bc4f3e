/* libtuccl: TuCCL's collective communication library, an NCCL-like C API.
 *
 * A communicator groups nRanks ranks (processes, or threads of one process under
 * tucclCommInitAll). Every collective is stream-ordered and asynchronous like NCCL's: the call
 * checks its arguments and enqueues; completion is observed on the stream. On the CPU device a
 * call on the NULL stream completes before it returns; other CPU streams come from
 * tucclStreamCreate and are waited for with tucclStreamSynchronize. On the CUDA device the
 * stream is the caller's cudaStream_t.
 *
 * Semantics follow NCCL's (counts in elements, in-place when sendbuff == recvbuff, or at the
 * rank's block for AllGather / ReduceScatter; Reduce ignores recvbuff on non-roots). No function
 * throws; every one returns a tucclResult_t, and tucclGetLastError names the reason of the last
 * failure of the calling thread.
 *
 * The environment variables libtuccl reads are listed in the README ("Environment").
 */
#ifndef TUCCL_TUCCL_H_
#define TUCCL_TUCCL_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TUCCL_MAJOR 0
#define TUCCL_MINOR 1
#define TUCCL_PATCH 0
#define TUCCL_VERSION_CODE (TUCCL_MAJOR * 10000 + TUCCL_MINOR * 100 + TUCCL_PATCH)

/* ---- Types ------------------------------------------------------------------------------------ */

#define TUCCL_UNIQUE_ID_BYTES 128
/* Opaque bytes: the root's address and a random magic. Rank 0 (or any process) makes it with
 * tucclGetUniqueId and hands it to every rank by its own means (MPI, a file, a store). */
typedef struct {
  char internal[TUCCL_UNIQUE_ID_BYTES];
} tucclUniqueId;

typedef struct tucclComm* tucclComm_t;
#define TUCCL_COMM_NULL NULL

/* The same type as cudaStream_t and CUstream, so a CUDA stream passes unchanged. */
typedef struct CUstream_st* tucclStream_t;

/* Numbered like ncclResult_t (NCCL 2.30). */
typedef enum {
  tucclSuccess = 0,
  tucclUnhandledCudaError = 1,
  tucclSystemError = 2,
  tucclInternalError = 3,
  tucclInvalidArgument = 4,
  tucclInvalidUsage = 5,
  tucclRemoteError = 6,
  tucclInProgress = 7,
  tucclTimeout = 8,
  tucclNumResults = 9
} tucclResult_t;

/* Numbered like ncclDataType_t (NCCL 2.24+). Every one is supported by every collective and
 * every reduction operation: integers wrap around (sum and product computed unsigned; avg divides
 * the wrapped sum by nranks, truncating toward zero, as NCCL does); float16, bfloat16 and the fp8
 * types (OCP FP8: e4m3, largest 448, no infinity; e5m2, largest 57344) compute in float and
 * round to nearest even once per operation, fp8 saturating to its largest finite value like
 * CUDA's __nv_fp8 types (__NV_SATFINITE); avg of floats is the sum divided by nranks. */
typedef enum {
  tucclInt8 = 0,
  tucclChar = 0,
  tucclUint8 = 1,
  tucclInt32 = 2,
  tucclInt = 2,
  tucclUint32 = 3,
  tucclInt64 = 4,
  tucclUint64 = 5,
  tucclFloat16 = 6,
  tucclHalf = 6,
  tucclFloat32 = 7,
  tucclFloat = 7,
  tucclFloat64 = 8,
  tucclDouble = 8,
  tucclBfloat16 = 9,
  tucclFloat8e4m3 = 10,
  tucclFloat8e5m2 = 11,
  tucclNumTypes = 12
} tucclDataType_t;

/* Numbered like ncclRedOp_t. Values from tucclNumOps on are the PreMulSum operators that
 * tucclRedOpCreatePreMulSum makes (tucclMaxRedOp only gives the type their range). */
typedef enum {
  tucclSum = 0,
  tucclProd = 1,
  tucclMax = 2,
  tucclMin = 3,
  tucclAvg = 4,
  tucclNumOps = 5,
  tucclMaxRedOp = 0x7fffffff
} tucclRedOp_t;

/* Where the scalar of a PreMulSum operator lives, numbered like ncclScalarResidence_t. */
typedef enum {
  tucclScalarDevice = 0,        /* device memory, read by every call when it runs */
  tucclScalarHostImmediate = 1  /* host memory, read when the operator is made */
} tucclScalarResidence_t;

/* Where a communicator runs its kernels. */
typedef enum { tucclDeviceCpu = 0, tucclDeviceCuda = 1 } tucclDeviceKind_t;

/* How a communicator is made (tucclCommInitRankConfig, tucclCommSplit, ...). Start from
 * TUCCL_CONFIG_INITIALIZER and set what you need. */
typedef struct {
  /* 1: init returns when the communicator is ready. 0 (non-blocking): init, split and shrink may
   * return tucclInProgress and finish in the background; tucclCommGetAsyncError reports
   * tucclInProgress until then, and any other call on the communicator waits for it. */
  int blocking;
  /* A name shown in the log lines of the communicator; NULL: none. Copied. */
  const char* commName;
  /* Accepted for NCCL's splitShare; a child never shares the staging of its parent. */
  int splitShare;
} tucclConfig_t;
#define TUCCL_CONFIG_INITIALIZER {1, NULL, 0}

/* tucclCommSplit's colour of a rank that joins no new communicator (its *newcomm is NULL). */
#define TUCCL_SPLIT_NOCOLOR (-1)

/* ---- Version and errors ----------------------------------------------------------------------- */

tucclResult_t tucclGetVersion(int* version);
const char* tucclGetErrorString(tucclResult_t result);
/* The reason of the calling thread's last failed call (comm may be NULL); "" when none. */
const char* tucclGetLastError(tucclComm_t comm);

/* ---- Communicators ---------------------------------------------------------------------------- */

/* A new unique id. With TUCCL_COMM_ID=host:port set, every process gets the same id for that
 * address (the launcher's rendezvous) and rank 0 listens there. */
tucclResult_t tucclGetUniqueId(tucclUniqueId* uniqueId);
/* Collective over the nranks ranks holding the same id; blocks until all joined or
 * TUCCL_TIMEOUT_S passed. */
tucclResult_t tucclCommInitRank(tucclComm_t* comm, int nranks, tucclUniqueId commId, int rank);
/* Rank and size from the launcher's environment (tuccl-run, mpirun, srun, torchrun) and the
 * rendezvous address from TUCCL_COMM_ID (or MASTER_ADDR / MASTER_PORT). On the CUDA device the
 * rank's GPU is its local rank modulo the GPUs visible, so ranks may share a GPU. */
tucclResult_t tucclCommInitFromEnv(tucclComm_t* comm);
/* One process, ndev ranks (threads); devlist may be NULL (devices 0..ndev-1; ignored on the CPU
 * device). comms[i] is rank i. */
tucclResult_t tucclCommInitAll(tucclComm_t* comms, int ndev, const int* devlist);
/* tucclCommInitRank with a configuration (config may be NULL: the defaults). The arguments are
 * checked at once. Inside a group (tucclCommInitRank too), the communicators of the group are made
 * together at the outermost tucclGroupEnd, each on a thread of its own, so one thread may
 * initialise several ranks; *comm is NULL until then. Non-blocking (config->blocking = 0): returns
 * tucclInProgress with *comm usable at once (tucclGroupEnd returns tucclInProgress for such
 * inits); the caller's current CUDA device is the communicator's, as for a blocking init. */
tucclResult_t tucclCommInitRankConfig(tucclComm_t* comm, int nranks, tucclUniqueId commId, int rank,
                                      tucclConfig_t* config);
/* tucclCommInitRankConfig from nId unique ids (NCCL's scalable init: every rank passes the same
 * ids); the first one is the rendezvous. */
tucclResult_t tucclCommInitRankScalable(tucclComm_t* newcomm, int nranks, int myrank, int nId,
                                        tucclUniqueId* commIds, tucclConfig_t* config);
/* Collective over comm: the ranks of equal colour form a new communicator, ranked by key (ties by
 * their rank in comm). color TUCCL_SPLIT_NOCOLOR: the rank joins none and gets NULL (it still takes
 * part). A new communicator has its own rendezvous (whatever TUCCL_COMM_ID says), comm's device
 * and settings, and config's name; a negative colour other than TUCCL_SPLIT_NOCOLOR is
 * tucclInvalidArgument. Deferred inside a group like an init. */
tucclResult_t tucclCommSplit(tucclComm_t comm, int color, int key, tucclComm_t* newcomm, tucclConfig_t* config);
/* Collective over the ranks of comm not listed in excludeRanks: they form a new communicator,
 * keeping their order. flags: 0 (the excluded ranks still take part) or 1 (abort: they are gone;
 * the calls in flight on comm are aborted, and the remaining ranks exchange only among
 * themselves, point to point). An excluded rank gets NULL. */
tucclResult_t tucclCommShrink(tucclComm_t comm, int* excludeRanks, int excludeCount, tucclComm_t* newcomm,
                              tucclConfig_t* config, int flags);
/* Waits for this rank's outstanding work on the communicator (bounded by TUCCL_TIMEOUT_S); it may
 * then only be destroyed or aborted: its calls, tucclCommHostAllGather, split, shrink and a second
 * finalize are tucclInvalidUsage (the queries and tucclCommGetAsyncError still answer). */
tucclResult_t tucclCommFinalize(tucclComm_t comm);
/* Waits for this rank's outstanding work on the communicator (a non-blocking init first), then
 * frees it. Local: it waits for no other rank, so ranks may destroy their communicators in any
 * order. The peers learn that this rank left (it is no failure for them); what they may still use
 * while they finish their own last calls (the staging of a GPU, the inter-node proxy) is kept by a
 * background thread until they destroyed the communicator too, or ended, or TUCCL_TIMEOUT_S
 * passed; at exit the process waits for those threads. */
tucclResult_t tucclCommDestroy(tucclComm_t comm);
/* Stops outstanding work (a call blocked in another thread returns an error; a non-blocking init
 * in progress stops at its next wait on the peers) and frees the communicator at once. Its peers
 * take it for a failure. */
tucclResult_t tucclCommAbort(tucclComm_t comm);
/* tucclSuccess, tucclInProgress while a non-blocking init, split or shrink is making the
 * communicator (or, on a parent, while its part of a non-blocking split's or shrink's exchange
 * runs), or the error that ended it or an asynchronous operation (the communicator is then
 * unusable: abort or destroy it). */
tucclResult_t tucclCommGetAsyncError(tucclComm_t comm, tucclResult_t* asyncError);
tucclResult_t tucclCommCount(const tucclComm_t comm, int* count);
tucclResult_t tucclCommUserRank(const tucclComm_t comm, int* rank);
/* The CUDA device of the communicator (-1 on the CPU device). */
tucclResult_t tucclCommCuDevice(const tucclComm_t comm, int* device);
tucclResult_t tucclCommDeviceKind(const tucclComm_t comm, tucclDeviceKind_t* kind);

/* Gathers `bytes` of host memory from every rank into recvbuff (rank r's at offset r * bytes) over
 * the communicator's bootstrap, for small control data — another library's unique id, a flag —
 * not for payload. Collective; bounded by TUCCL_TIMEOUT_S. */
tucclResult_t tucclCommHostAllGather(tucclComm_t comm, const void* sendbuff, void* recvbuff, size_t bytes);

/* ---- CPU streams ------------------------------------------------------------------------------ */

/* An in-order queue run by a worker thread, for communicators on the CPU device. */
tucclResult_t tucclStreamCreate(tucclStream_t* stream);
/* Waits until every call enqueued on the stream completed; returns the first error among them. */
tucclResult_t tucclStreamSynchronize(tucclStream_t stream);
/* Waits for the stream, then frees it. */
tucclResult_t tucclStreamDestroy(tucclStream_t stream);

/* ---- Collectives ------------------------------------------------------------------------------ */

tucclResult_t tucclAllReduce(const void* sendbuff, void* recvbuff, size_t count, tucclDataType_t datatype,
                             tucclRedOp_t op, tucclComm_t comm, tucclStream_t stream);
/* sendcount elements per rank; recvbuff holds nranks * sendcount. */
tucclResult_t tucclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, tucclDataType_t datatype,
                             tucclComm_t comm, tucclStream_t stream);
/* sendbuff holds nranks * recvcount; rank r receives block r of the reduction. */
tucclResult_t tucclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, tucclDataType_t datatype,
                                 tucclRedOp_t op, tucclComm_t comm, tucclStream_t stream);
/* sendbuff is read on the root only. */
tucclResult_t tucclBroadcast(const void* sendbuff, void* recvbuff, size_t count, tucclDataType_t datatype, int root,
                             tucclComm_t comm, tucclStream_t stream);
/* recvbuff is written on the root only (it may be NULL elsewhere). */
tucclResult_t tucclReduce(const void* sendbuff, void* recvbuff, size_t count, tucclDataType_t datatype,
                          tucclRedOp_t op, int root, tucclComm_t comm, tucclStream_t stream);
/* count elements per pair: block j of sendbuff goes to rank j; block i of recvbuff comes from rank i. */
tucclResult_t tucclAllToAll(const void* sendbuff, void* recvbuff, size_t count, tucclDataType_t datatype,
                            tucclComm_t comm, tucclStream_t stream);

/* ---- Reduction operators ---------------------------------------------------------------------- */

/* A PreMulSum operator of comm (NCCL's ncclRedOpCreatePreMulSum): a reduction with it sums
 * scalar * input over the ranks — every rank's input multiplied by the scalar (in the datatype:
 * integers wrap, float16, bfloat16 and fp8 multiply in float and round once), then summed.
 * `scalar` points at one element of `datatype`: read now with tucclScalarHostImmediate; with
 * tucclScalarDevice it is kept and read by every call when it runs, from the communicator's device
 * memory (on the CPU device, host memory), so it may change between calls. The operator serves
 * AllReduce, ReduceScatter and Reduce of `datatype` on comm only (another datatype or
 * communicator: tucclInvalidArgument). Values start at tucclNumOps; a value is never handed out
 * twice by one communicator. A one-rank communicator on the CUDA device refuses its calls
 * (tucclInvalidUsage). */
tucclResult_t tucclRedOpCreatePreMulSum(tucclRedOp_t* op, void* scalar, tucclDataType_t datatype,
                                        tucclScalarResidence_t residence, tucclComm_t comm);
/* Destroys an operator tucclRedOpCreatePreMulSum made on comm; calls already issued with it are not
 * affected, later ones are refused (tucclInvalidArgument), as are unknown or destroyed operators. */
tucclResult_t tucclRedOpDestroy(tucclRedOp_t op, tucclComm_t comm);

/* ---- Point-to-point ------------------------------------------------------------------------- */

/* count elements of sendbuff to rank peer, which posts a tucclRecv of the same count and
 * datatype (every datatype; the bytes travel unchanged). Sends and receives between a pair of
 * ranks match in the order they were issued. Like NCCL, a send may wait for its receive: to
 * exchange with several peers at once, or to send and receive from one thread, put the calls in a
 * group; a group's sends and receives complete together, in any order of the calls inside it. */
tucclResult_t tucclSend(const void* sendbuff, size_t count, tucclDataType_t datatype, int peer, tucclComm_t comm,
                        tucclStream_t stream);
tucclResult_t tucclRecv(void* recvbuff, size_t count, tucclDataType_t datatype, int peer, tucclComm_t comm,
                        tucclStream_t stream);
/* Every rank sends count elements to root, which receives rank r's at recvbuff + r * count. */
tucclResult_t tucclGather(const void* sendbuff, void* recvbuff, size_t count, tucclDataType_t datatype, int root,
                          tucclComm_t comm, tucclStream_t stream);
/* root sends block r of sendbuff (count elements at sendbuff + r * count) to rank r. */
tucclResult_t tucclScatter(const void* sendbuff, void* recvbuff, size_t count, tucclDataType_t datatype, int root,
                           tucclComm_t comm, tucclStream_t stream);
/* All-to-all of varying sizes: sendcounts[j] elements at sendbuff + sdispls[j] go to rank j, which
 * receives them at its recvbuff + rdispls[i] (recvcounts[i] elements, equal to what rank i sends it).
 * Counts and displacements in elements. */
tucclResult_t tucclAllToAllv(const void* sendbuff, const size_t sendcounts[], const size_t sdispls[], void* recvbuff,
                             const size_t recvcounts[], const size_t rdispls[], tucclDataType_t datatype,
                             tucclComm_t comm, tucclStream_t stream);

/* ---- Groups ----------------------------------------------------------------------------------- */

/* Calls between the outermost start and end are launched together at the end, so one thread can
 * drive several communicators (the ranks of tucclCommInitAll). Groups nest. */
tucclResult_t tucclGroupStart(void);
tucclResult_t tucclGroupEnd(void);

#ifdef __cplusplus
}
#endif

#endif /* TUCCL_TUCCL_H_ */
