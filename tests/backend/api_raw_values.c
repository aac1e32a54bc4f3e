/* Calls of the C API with enum arguments holding any int, as a C caller may pass them (C lets an
 * int stand for an enum; the C++ test cannot make such a value without undefined behaviour). */
#include <tuccl/tuccl.h>

tucclResult_t allReduceWithRawValues(const void* sendbuff, void* recvbuff, size_t count, int datatype, int op,
                                     tucclComm_t comm) {
  return tucclAllReduce(sendbuff, recvbuff, count, (tucclDataType_t)datatype, (tucclRedOp_t)op, comm, NULL);
}

const char* errorStringOfRawValue(int result) { return tucclGetErrorString((tucclResult_t)result); }
