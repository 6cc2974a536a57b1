#include "luong/util/progress.h"

#include <unistd.h>

#include <cmath>

namespace luong {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto total = static_cast<long long>(std::llround(seconds));
  char buffer[32];
  if (total >= 3600) {
    std::snprintf(buffer, sizeof buffer, "%lldh%02lldm", total / 3600, (total / 60) % 60);
  } else if (total >= 60) {
    std::snprintf(buffer, sizeof buffer, "%lldm%02llds", total / 60, total % 60);
  } else {
    std::snprintf(buffer, sizeof buffer, "%.1fs", seconds);
  }
  return buffer;
}

Progress::Progress(std::string label, std::int64_t total, std::string unit, std::FILE* stream)
    : label_(std::move(label)),
      total_(total),
      unit_(std::move(unit)),
      stream_(stream),
      tty_(stream != nullptr && ::isatty(::fileno(stream)) != 0),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

double Progress::elapsed_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

double Progress::rate() const {
  const double seconds = elapsed_seconds();
  return seconds > 0 ? static_cast<double>(done_) / seconds : 0.0;
}

void Progress::advance(std::int64_t done, std::function<std::string()> detail) {
  done_ += done;
  detail_ = std::move(detail);
  const auto now = std::chrono::steady_clock::now();
  // A terminal is redrawn ~5 times a second; a log gets a line every 10 s at most.
  const double interval = tty_ ? 0.2 : 10.0;
  if (std::chrono::duration<double>(now - last_draw_).count() >= interval) {
    last_draw_ = now;
    draw(false);
  }
}

void Progress::finish() {
  if (tty_) {
    draw(true);
    std::fputc('\n', stream_);
    std::fflush(stream_);
  }
}

void Progress::draw(bool final) {
  if (stream_ == nullptr) return;
  const double r = rate();
  std::string eta = "?";
  if (total_ > 0 && r > 0) eta = format_duration(static_cast<double>(total_ - done_) / r);
  char percent[16] = "";
  if (total_ > 0) std::snprintf(percent, sizeof percent, "%5.1f%% ", 100.0 * done_ / total_);
  const std::string detail = detail_ ? detail_() : std::string();
  std::fprintf(stream_, "%s%s %s%.0f %s/s, ETA %s%s%s%s", tty_ ? "\r\033[K" : "", label_.c_str(), percent, r,
               unit_.c_str(), final ? "0s" : eta.c_str(), detail.empty() ? "" : ", ", detail.c_str(),
               tty_ ? "" : "\n");
  std::fflush(stream_);
}

}  // namespace luong
