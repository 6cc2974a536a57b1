#pragma once
// Progress reporting for long work: a rewritten line with rate and ETA on a terminal, plain
// periodic lines otherwise (logs, CI).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

namespace luong {

class Progress {
 public:
  /// `total` units of work (0 = unknown), `unit` names them ("tok", "sent"); a null `stream` is silent.
  Progress(std::string label, std::int64_t total, std::string unit, std::FILE* stream = stderr);
  /// Adds `done` units. `detail` (e.g. the running loss) is shown after the rate; it is called only
  /// when a line is drawn, so a detail that must wait for a GPU costs nothing between lines.
  void advance(std::int64_t done, std::function<std::string()> detail = {});
  /// Ends the line on a terminal.
  void finish();
  double elapsed_seconds() const;
  double rate() const;

 private:
  void draw(bool final);
  std::string label_;
  std::int64_t total_;
  std::string unit_;
  std::FILE* stream_;
  bool tty_;
  std::int64_t done_ = 0;
  std::function<std::string()> detail_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

/// "1m05s"-style duration.
std::string format_duration(double seconds);

}  // namespace luong
