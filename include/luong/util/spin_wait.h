#pragma once
// Waiting for another thread of this process, turn by turn.
#include <thread>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace luong {

/// One turn of a wait loop each call. A partner a step's work apart arrives within microseconds,
/// so the first turns only pause (about 140 cycles each on Sapphire Rapids); a partner that has lost
/// its core to another process (more threads than cores) needs that core back, so after them every
/// turn yields it.
class SpinWait {
 public:
  void operator()() {
    if (spins_ < kSpinsBeforeYielding) {
      ++spins_;
#if defined(__x86_64__)
      _mm_pause();
#endif
    } else {
      std::this_thread::yield();
    }
  }
  /// After the awaited thing came: the next wait starts with pauses again.
  void reset() { spins_ = 0; }

 private:
  static constexpr int kSpinsBeforeYielding = 256;
  int spins_ = 0;
};

}  // namespace luong
