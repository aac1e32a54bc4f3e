// One direction of a socket connection once the handshake is done: a control socket carrying a
// header per message (and small messages inline), and data sockets carrying the chunks of large
// messages, each progressed by a helper thread that owns a few of them.
//
// Both ends cut a message of `size` bytes the same way (chunk = max(kMinChunk, ceil(size /
// nData)), chunk i on data socket (message number + i) % nData), so the receiver knows from the
// header alone what each data socket will carry next; every socket is a FIFO, so chunks need no
// headers. Control I/O happens in the caller's thread (isend / irecv / test, never blocking);
// data I/O in the helper threads. A socket error or a peer that closes mid-message fails the
// comm: every unfinished request's test() returns the error from then on.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "support/status.h"
#include "transport/socket.h"

namespace tuccl::net {

inline constexpr int kMaxGroupedReceives = 8;   // maxRecvs
inline constexpr int kRequestsPerComm = 32;     // NCCL_NET_MAX_REQUESTS
inline constexpr size_t kInlineBytes = 16384;   // messages up to this size travel on the control socket
inline constexpr size_t kMinChunk = 64 * 1024;  // NCCL_SOCKET_MIN_TASKSIZE

class SocketComm;
class HelperThread;

/// One isend, or one (grouped) irecv of up to kMaxGroupedReceives buffers.
struct SocketRequest {
  struct Slot {
    char* data = nullptr;
    size_t capacity = 0;  ///< receive: the posted size; send: the message size
    int tag = 0;
    size_t size = 0;  ///< bytes sent or received
    bool matched = false;
  };
  SocketComm* comm = nullptr;
  bool inUse = false;
  int n = 0;
  Slot slots[kMaxGroupedReceives];
  int matched = 0;          ///< messages whose header (and inline bytes) are through the control socket
  bool controlDone = false;  ///< all n matched
  std::atomic<int> pendingChunks{0};
};

/// The result of test().
struct TestResult {
  bool done = false;
  int n = 0;
  size_t sizes[kMaxGroupedReceives] = {};
};

class SocketComm {
 public:
  /// `sockets[0]` is the control socket, the others data sockets; `nThreads` helpers share them.
  SocketComm(bool sending, std::vector<transport::Socket> sockets, int nThreads);
  ~SocketComm();
  SocketComm(const SocketComm&) = delete;
  SocketComm& operator=(const SocketComm&) = delete;

  /// A send of `size` bytes with `tag`; nullptr when all request slots are busy (retry later).
  Expected<SocketRequest*> postSend(const void* data, size_t size, int tag);
  /// A receive into n buffers; nullptr when all request slots are busy.
  Expected<SocketRequest*> postRecv(int n, void* const* data, const size_t* sizes, const int* tags);
  /// Progresses the connection; done (and the sizes) when `request` has completed, which frees it.
  Expected<TestResult> test(SocketRequest* request);

  /// Records the first failure; later tests of unfinished requests return it.
  void fail(const std::string& message);
  bool sending() const { return sending_; }

 private:
  struct ControlState;
  SocketRequest* allocate();
  Status failure();
  Status progressControl();
  Status progressSendControl();
  Status progressRecvControl();
  Status startMessage(SocketRequest& request, int slot);
  void queueChunks(SocketRequest& request, int slot);

  bool sending_;
  transport::Socket control_;
  std::vector<transport::Socket> data_;
  std::vector<std::unique_ptr<HelperThread>> helpers_;
  std::vector<int> helperOfSocket_;
  std::unique_ptr<SocketRequest[]> requests_;
  int requestCount_;
  std::vector<SocketRequest*> posted_;  ///< FIFO of requests whose control part is not done
  std::unique_ptr<ControlState> control_state_;
  uint64_t messages_ = 0;  ///< messages through the control socket (rotates the first data socket)
  std::atomic<bool> failed_{false};
  std::mutex failureMutex_;
  std::string failure_;
};

}  // namespace tuccl::net
