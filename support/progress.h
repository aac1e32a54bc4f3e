// Progress of long work (NVRTC over every rank and architecture, a benchmark's simulations) on a
// terminal: one line on stderr, rewritten in place, erased at the end. Nothing at all when stderr is
// not a terminal, so logs, pipes and tests see only the results.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>

namespace tuccl {

class TerminalProgress {
 public:
  /// `label` says what is counted ("NVRTC sm_90"); `total` how many steps make the whole.
  TerminalProgress(std::string label, size_t total)
      : label_(std::move(label)), total_(total), enabled_(isatty(fileno(stderr)) != 0) {
    show();
  }
  TerminalProgress(const TerminalProgress&) = delete;
  TerminalProgress& operator=(const TerminalProgress&) = delete;
  ~TerminalProgress() { finish(); }

  /// One more step done; safe to call from several threads.
  void advance(size_t steps = 1) {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ += steps;
    show();
  }

  /// Erases the line (also done on destruction).
  void finish() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!enabled_ || finished_) return;
    finished_ = true;
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
  }

 private:
  void show() {
    if (!enabled_ || finished_) return;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    std::fprintf(stderr, "\r\033[K%s: %zu/%zu (%.0f s)", label_.c_str(), done_, total_, seconds);
    std::fflush(stderr);
  }

  std::string label_;
  size_t total_ = 0;
  size_t done_ = 0;
  bool enabled_ = false;
  bool finished_ = false;
  std::mutex mutex_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace tuccl
