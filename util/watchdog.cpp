#include "luong/util/watchdog.h"

#include <cstdio>
#include <cstdlib>

#include "luong/util/error.h"

namespace luong {

Watchdog::Watchdog(std::string prefix) : prefix_(std::move(prefix)), thread_([this] { watch(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_one();
  thread_.join();
}

void Watchdog::arm(std::chrono::milliseconds limit, std::string what) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    armed_ = true;
    deadline_ = std::chrono::steady_clock::now() + limit;
    what_ = std::move(what);
  }
  changed_.notify_one();
}

void Watchdog::disarm() {
  std::lock_guard<std::mutex> lock(mutex_);
  armed_ = false;
}

void Watchdog::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    if (!armed_) {
      changed_.wait(lock);
      continue;
    }
    const auto deadline = deadline_;
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout && armed_ && !stopping_ &&
        deadline_ == deadline) {
      std::fprintf(stderr, "%s\n", printable(prefix_ + what_, 2000).c_str());
      std::fflush(stderr);
      std::_Exit(2);
    }
  }
}

}  // namespace luong
