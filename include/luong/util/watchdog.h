#pragma once
// A deadline for calls that cannot be cancelled: a library that waits on a peer past its own
// timeout (c10d's store client once its server accepted and then stalled) would hold the process
// for minutes. Armed around such a call, the watchdog ends the process with one line instead.
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace luong {

class Watchdog {
 public:
  /// `prefix` starts the line it prints ("luong train: rank 1 of 2: ").
  explicit Watchdog(std::string prefix);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  /// Unless disarm() comes within `limit`, prints `<prefix><what>` on stderr and ends the process
  /// with exit status 2 (std::_Exit: whatever the stalled call holds cannot be unwound).
  void arm(std::chrono::milliseconds limit, std::string what);
  void disarm();

  /// Arms `watchdog` for one scope.
  class Scope {
   public:
    Scope(Watchdog& watchdog, std::chrono::milliseconds limit, std::string what) : watchdog_(watchdog) {
      watchdog_.arm(limit, std::move(what));
    }
    ~Scope() { watchdog_.disarm(); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Watchdog& watchdog_;
  };

 private:
  void watch();

  std::string prefix_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool armed_ = false;
  bool stopping_ = false;
  std::chrono::steady_clock::time_point deadline_;
  std::string what_;
  std::thread thread_;
};

}  // namespace luong
