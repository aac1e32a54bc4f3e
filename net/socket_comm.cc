// The data path of a socket connection (socket_comm.h).
#include "net/socket_comm.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <thread>

#include "net/handshake.h"

namespace tuccl::net {
namespace {

enum class IoOutcome { Progress, WouldBlock, Closed, Error };

/// One non-blocking send or receive of up to `bytes`; `moved` gets the count.
IoOutcome moveBytes(int fd, bool sending, char* data, size_t bytes, size_t& moved) {
  const ssize_t result = sending ? ::send(fd, data, bytes, MSG_NOSIGNAL | MSG_DONTWAIT)
                                 : ::recv(fd, data, bytes, MSG_DONTWAIT);
  if (result > 0) {
    moved = static_cast<size_t>(result);
    return IoOutcome::Progress;
  }
  moved = 0;
  if (result == 0 && bytes > 0) return sending ? IoOutcome::WouldBlock : IoOutcome::Closed;
  if (result == 0) return IoOutcome::Progress;
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return IoOutcome::WouldBlock;
  return IoOutcome::Error;
}

/// Sends what is left of a header and of the inline bytes after it in one system call (a small
/// message is one TCP segment and one wake-up of the receiver, not two).
IoOutcome sendTwo(int fd, char* first, size_t firstBytes, char* second, size_t secondBytes, size_t& moved) {
  iovec parts[2] = {{first, firstBytes}, {second, secondBytes}};
  msghdr message{};
  message.msg_iov = firstBytes > 0 ? parts : parts + 1;
  message.msg_iovlen = firstBytes > 0 ? (secondBytes > 0 ? 2 : 1) : 1;
  const ssize_t result = ::sendmsg(fd, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (result > 0) {
    moved = static_cast<size_t>(result);
    return IoOutcome::Progress;
  }
  moved = 0;
  if (result == 0) return IoOutcome::WouldBlock;
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return IoOutcome::WouldBlock;
  return IoOutcome::Error;
}

size_t chunkSize(size_t size, size_t nData) { return std::max(kMinChunk, (size + nData - 1) / nData); }

}  // namespace

// ---- Helper threads ------------------------------------------------------------------------------

/// Moves the chunks queued on a few data sockets, in order per socket, waking on an eventfd.
class HelperThread {
 public:
  struct Chunk {
    char* data;
    size_t size;
    size_t done;
    SocketRequest* request;
  };

  HelperThread(SocketComm& comm, bool sending, std::vector<int> fds)
      : comm_(comm), sending_(sending), fds_(std::move(fds)), queues_(fds_.size()) {
    wake_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    thread_ = std::thread([this] { run(); });
  }
  ~HelperThread() {
    stop_.store(true, std::memory_order_release);
    signal();
    thread_.join();
    if (wake_ >= 0) ::close(wake_);
  }
  HelperThread(const HelperThread&) = delete;
  HelperThread& operator=(const HelperThread&) = delete;

  void push(int local, const Chunk& chunk) {
    {
      std::lock_guard lock(mutex_);
      queues_[static_cast<size_t>(local)].push_back(chunk);
    }
    signal();
  }

 private:
  void signal() {
    const uint64_t one = 1;
    if (wake_ >= 0) (void)!::write(wake_, &one, sizeof one);
  }

  Chunk* head(size_t socket) {
    std::lock_guard lock(mutex_);
    return queues_[socket].empty() ? nullptr : &queues_[socket].front();
  }

  void popHead(size_t socket) {
    std::lock_guard lock(mutex_);
    queues_[socket].pop_front();
  }

  /// Moves as much of `socket`'s queue as the socket takes now; false on a failure.
  bool progress(size_t socket) {
    for (Chunk* chunk = head(socket); chunk != nullptr; chunk = head(socket)) {
      while (chunk->done < chunk->size) {
        size_t moved = 0;
        const IoOutcome outcome = moveBytes(fds_[socket], sending_, chunk->data + chunk->done, chunk->size - chunk->done, moved);
        if (outcome == IoOutcome::WouldBlock) return true;
        if (outcome != IoOutcome::Progress) {
          comm_.fail(outcome == IoOutcome::Closed ? "the peer closed a data socket in the middle of a message"
                                                  : std::string("data socket error: ") + std::strerror(errno));
          return false;
        }
        chunk->done += moved;
      }
      chunk->request->pendingChunks.fetch_sub(1, std::memory_order_acq_rel);
      popHead(socket);
    }
    return true;
  }

  void run() {
    std::vector<pollfd> polled;
    std::vector<size_t> which;
    bool healthy = true;
    while (!stop_.load(std::memory_order_acquire)) {
      polled.assign(1, pollfd{wake_, POLLIN, 0});
      which.clear();
      for (size_t s = 0; healthy && s < fds_.size(); ++s) {
        if (head(s) == nullptr) continue;
        polled.push_back({fds_[s], static_cast<short>(sending_ ? POLLOUT : POLLIN), 0});
        which.push_back(s);
      }
      if (::poll(polled.data(), polled.size(), -1) < 0 && errno != EINTR) break;
      if (polled[0].revents != 0) {
        uint64_t count = 0;
        (void)!::read(wake_, &count, sizeof count);
      }
      for (size_t i = 1; healthy && i < polled.size(); ++i)
        if (polled[i].revents != 0) healthy = progress(which[i - 1]);
    }
  }

  SocketComm& comm_;
  bool sending_;
  std::vector<int> fds_;
  std::mutex mutex_;
  std::vector<std::deque<Chunk>> queues_;
  int wake_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// ---- The comm --------------------------------------------------------------------------------

struct SocketComm::ControlState {
  // The message going through the control socket now (the first of posted_).
  int slot = -1;  ///< send: 0; receive: the slot its tag picked (-1: header not complete)
  MessageHeader header{};
  size_t headerDone = 0;
  size_t inlineDone = 0;
};

SocketComm::SocketComm(bool sending, std::vector<transport::Socket> sockets, int nThreads)
    : sending_(sending),
      control_(std::move(sockets.front())),
      requestCount_(sending ? kRequestsPerComm * kMaxGroupedReceives : kRequestsPerComm),
      control_state_(std::make_unique<ControlState>()) {
  for (size_t i = 1; i < sockets.size(); ++i) data_.push_back(std::move(sockets[i]));
  requests_ = std::make_unique<SocketRequest[]>(static_cast<size_t>(requestCount_));
  posted_.reserve(static_cast<size_t>(requestCount_));
  const size_t threads = std::clamp<size_t>(static_cast<size_t>(std::max(nThreads, 1)), 1, std::max<size_t>(data_.size(), 1));
  std::vector<std::vector<int>> owned(threads);
  for (size_t s = 0; s < data_.size(); ++s) {
    helperOfSocket_.push_back(static_cast<int>(s % threads));
    owned[s % threads].push_back(data_[s].fd());
  }
  for (size_t t = 0; t < threads && !data_.empty(); ++t)
    helpers_.push_back(std::make_unique<HelperThread>(*this, sending_, owned[t]));
}

SocketComm::~SocketComm() { helpers_.clear(); }  // joins the helpers before the sockets close

void SocketComm::fail(const std::string& message) {
  std::lock_guard lock(failureMutex_);
  if (failed_.load(std::memory_order_relaxed)) return;
  failure_ = message;
  failed_.store(true, std::memory_order_release);
}

Status SocketComm::failure() {
  std::lock_guard lock(failureMutex_);
  return makeError(ErrorCode::RemoteError, failure_);
}

SocketRequest* SocketComm::allocate() {
  for (int i = 0; i < requestCount_; ++i) {
    SocketRequest& request = requests_[static_cast<size_t>(i)];
    if (request.inUse) continue;
    request.comm = this;
    request.inUse = true;
    request.matched = 0;
    request.controlDone = false;
    request.pendingChunks.store(0, std::memory_order_relaxed);
    return &request;
  }
  return nullptr;
}

Expected<SocketRequest*> SocketComm::postSend(const void* data, size_t size, int tag) {
  if (!sending_) return makeError(ErrorCode::Internal, "isend on a receiving comm");
  SocketRequest* request = allocate();
  if (request == nullptr) return request;
  request->n = 1;
  request->slots[0] = {static_cast<char*>(const_cast<void*>(data)), size, tag, size, false};
  posted_.push_back(request);
  Status progressed = progressControl();
  if (!progressed) return progressed;
  return request;
}

Expected<SocketRequest*> SocketComm::postRecv(int n, void* const* data, const size_t* sizes, const int* tags) {
  if (sending_) return makeError(ErrorCode::Internal, "irecv on a sending comm");
  if (n < 1 || n > kMaxGroupedReceives)
    return makeError(ErrorCode::Internal, "irecv of " + std::to_string(n) + " buffers (1.." +
                                              std::to_string(kMaxGroupedReceives) + " supported)");
  SocketRequest* request = allocate();
  if (request == nullptr) return request;
  request->n = n;
  for (int i = 0; i < n; ++i) request->slots[i] = {static_cast<char*>(data[i]), sizes[i], tags[i], 0, false};
  posted_.push_back(request);
  Status progressed = progressControl();
  if (!progressed) return progressed;
  return request;
}

Status SocketComm::progressControl() {
  if (failed_.load(std::memory_order_acquire)) return failure();
  Status status = sending_ ? progressSendControl() : progressRecvControl();
  if (!status) fail(status.message());
  return status;
}

void SocketComm::queueChunks(SocketRequest& request, int slot) {
  const size_t size = request.slots[slot].size;
  const size_t nData = data_.size();
  const size_t chunk = chunkSize(size, nData);
  const size_t count = (size + chunk - 1) / chunk;
  request.pendingChunks.fetch_add(static_cast<int>(count), std::memory_order_acq_rel);
  for (size_t i = 0; i < count; ++i) {
    const size_t socket = (messages_ + i) % nData;
    const size_t offset = i * chunk;
    HelperThread::Chunk piece{request.slots[slot].data + offset, std::min(chunk, size - offset), 0, &request};
    // A helper's sockets are data_[h], data_[h + threads], ...: the local index is socket / threads.
    helpers_[static_cast<size_t>(helperOfSocket_[socket])]->push(static_cast<int>(socket / helpers_.size()), piece);
  }
}

/// After a message's header (and inline bytes): hands its chunks to the helpers.
Status SocketComm::startMessage(SocketRequest& request, int slot) {
  if (request.slots[slot].size > kInlineBytes) {
    if (data_.empty()) return makeError(ErrorCode::Internal, "a large message on a connection without data sockets");
    queueChunks(request, slot);
  }
  ++messages_;
  request.slots[slot].matched = true;
  if (++request.matched == request.n) request.controlDone = true;
  return {};
}

Status SocketComm::progressSendControl() {
  ControlState& state = *control_state_;
  while (!posted_.empty()) {
    SocketRequest& request = *posted_.front();
    const SocketRequest::Slot& slot = request.slots[0];
    if (state.headerDone == 0 && state.slot < 0) {
      state.header = makeHeader(slot.tag, slot.size);
      state.slot = 0;
      state.inlineDone = 0;
    }
    const size_t inlineBytes = slot.size <= kInlineBytes ? slot.size : 0;
    while (state.headerDone < sizeof(MessageHeader) || state.inlineDone < inlineBytes) {
      const size_t headerLeft = sizeof(MessageHeader) - state.headerDone;
      size_t moved = 0;
      const IoOutcome outcome = sendTwo(control_.fd(), reinterpret_cast<char*>(&state.header) + state.headerDone,
                                        headerLeft, slot.data + state.inlineDone, inlineBytes - state.inlineDone, moved);
      if (outcome == IoOutcome::WouldBlock) return {};
      if (outcome != IoOutcome::Progress)
        return makeError(ErrorCode::RemoteError, std::string("control socket send failed: ") + std::strerror(errno));
      const size_t toHeader = std::min(moved, headerLeft);
      state.headerDone += toHeader;
      state.inlineDone += moved - toHeader;
    }
    Status started = startMessage(request, 0);
    if (!started) return started;
    state = ControlState{};
    posted_.erase(posted_.begin());
  }
  return {};
}

Status SocketComm::progressRecvControl() {
  ControlState& state = *control_state_;
  while (!posted_.empty()) {
    SocketRequest& request = *posted_.front();
    while (state.headerDone < sizeof(MessageHeader)) {
      size_t moved = 0;
      const IoOutcome outcome = moveBytes(control_.fd(), false, reinterpret_cast<char*>(&state.header) + state.headerDone,
                                          sizeof(MessageHeader) - state.headerDone, moved);
      if (outcome == IoOutcome::WouldBlock) return {};
      if (outcome == IoOutcome::Closed)
        return makeError(ErrorCode::RemoteError, "the sender closed the connection with a receive posted");
      if (outcome == IoOutcome::Error)
        return makeError(ErrorCode::RemoteError, std::string("control socket receive failed: ") + std::strerror(errno));
      state.headerDone += moved;
    }
    if (state.slot < 0) {
      PostedBuffer posted[kMaxGroupedReceives];
      for (int i = 0; i < request.n; ++i)
        posted[i] = {request.slots[i].tag, request.slots[i].capacity, request.slots[i].matched};
      Expected<int> slot = matchHeader(state.header, std::span<const PostedBuffer>(posted, static_cast<size_t>(request.n)));
      if (!slot) return slot.status();
      state.slot = *slot;
      request.slots[state.slot].size = state.header.size;
    }
    SocketRequest::Slot& slot = request.slots[state.slot];
    const size_t inlineBytes = slot.size <= kInlineBytes ? slot.size : 0;
    while (state.inlineDone < inlineBytes) {
      size_t moved = 0;
      const IoOutcome outcome = moveBytes(control_.fd(), false, slot.data + state.inlineDone, inlineBytes - state.inlineDone, moved);
      if (outcome == IoOutcome::WouldBlock) return {};
      if (outcome != IoOutcome::Progress)
        return makeError(ErrorCode::RemoteError, "the sender went away in the middle of a message");
      state.inlineDone += moved;
    }
    Status started = startMessage(request, state.slot);
    if (!started) return started;
    state = ControlState{};
    if (request.controlDone) posted_.erase(posted_.begin());
  }
  return {};
}

Expected<TestResult> SocketComm::test(SocketRequest* request) {
  TestResult result;
  if (request == nullptr || request->comm != this || !request->inUse)
    return makeError(ErrorCode::Internal, "test of a request that is not in flight");
  if (!request->controlDone) {
    Status progressed = progressControl();
    if (!progressed) return progressed;
  }
  if (request->controlDone && request->pendingChunks.load(std::memory_order_acquire) == 0) {
    result.done = true;
    result.n = request->n;
    for (int i = 0; i < request->n; ++i) result.sizes[i] = request->slots[i].size;
    request->inUse = false;
    return result;
  }
  if (failed_.load(std::memory_order_acquire)) return failure();
  // What is left is the helpers' (chunks in flight): give them the processor. Callers poll test()
  // in a loop (NCCL's proxy thread does); on a machine with fewer free cores than threads that
  // loop would otherwise take the time slices the helpers need to move the bytes.
  if (request->controlDone) std::this_thread::yield();
  return result;
}

}  // namespace tuccl::net
