// CPU streams (cpu_stream.h).
#include "backend/cpu_stream.h"

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>

namespace tuccl::backend {

struct CpuStream::Impl {
  std::mutex mutex;
  std::condition_variable wake;
  std::condition_variable idle;
  std::deque<Task> queue;
  bool running = false;  // a task is being run
  bool stop = false;
  Status firstError;
  std::thread worker;

  void loop() {
    std::unique_lock lock(mutex);
    for (;;) {
      wake.wait(lock, [&] { return stop || !queue.empty(); });
      if (queue.empty()) return;  // stop requested and nothing left
      Task task = std::move(queue.front());
      queue.pop_front();
      running = true;
      lock.unlock();
      Status status;
      try {
        status = task();
      } catch (const std::exception& error) {
        status = makeError(ErrorCode::Internal, std::string("a stream task threw: ") + error.what());
      }
      lock.lock();
      running = false;
      if (!status && firstError) firstError = status;
      if (queue.empty()) idle.notify_all();
    }
  }
};

namespace {

std::mutex registryMutex;
std::map<tucclStream_t, std::shared_ptr<CpuStream>>& registry() {
  static auto* streams = new std::map<tucclStream_t, std::shared_ptr<CpuStream>>();
  return *streams;
}

}  // namespace

CpuStream::CpuStream() : impl_(std::make_unique<Impl>()) {}

CpuStream::~CpuStream() {
  {
    std::lock_guard lock(impl_->mutex);
    impl_->stop = true;
  }
  impl_->wake.notify_all();
  if (impl_->worker.joinable()) impl_->worker.join();
}

Expected<tucclStream_t> CpuStream::create() {
  std::shared_ptr<CpuStream> stream(new CpuStream());
  try {
    stream->impl_->worker = std::thread([impl = stream->impl_.get()] { impl->loop(); });
  } catch (const std::system_error& error) {
    return makeError(ErrorCode::SystemError, std::string("cannot start a stream worker thread: ") + error.what());
  }
  auto handle = reinterpret_cast<tucclStream_t>(stream.get());
  std::lock_guard lock(registryMutex);
  registry()[handle] = std::move(stream);
  return handle;
}

std::shared_ptr<CpuStream> CpuStream::find(tucclStream_t handle) {
  if (handle == nullptr) return nullptr;
  std::lock_guard lock(registryMutex);
  auto it = registry().find(handle);
  return it == registry().end() ? nullptr : it->second;
}

Status CpuStream::destroy(tucclStream_t handle) {
  std::shared_ptr<CpuStream> stream;
  {
    std::lock_guard lock(registryMutex);
    auto it = registry().find(handle);
    if (it == registry().end()) return makeError(ErrorCode::InvalidArgument, "not a live TuCCL CPU stream");
    stream = std::move(it->second);
    registry().erase(it);
  }
  return stream->synchronize();  // the worker ends when the last reference goes
}

void CpuStream::enqueue(Task task) {
  {
    std::lock_guard lock(impl_->mutex);
    impl_->queue.push_back(std::move(task));
  }
  impl_->wake.notify_one();
}

Status CpuStream::synchronize() {
  std::unique_lock lock(impl_->mutex);
  impl_->idle.wait(lock, [&] { return impl_->queue.empty() && !impl_->running; });
  Status status = std::move(impl_->firstError);
  impl_->firstError = Status();
  return status;
}

}  // namespace tuccl::backend
