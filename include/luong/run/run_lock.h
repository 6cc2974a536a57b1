#pragma once
// One training process per run directory.
#include <string>

namespace luong::run {

/// An exclusive lock (flock) on RUN_DIR/.lock for as long as the object lives; the file records the
/// holder's PID. Creates RUN_DIR if it is missing, and refuses a directory that is neither empty nor
/// a luong run (no config.json), so that --out / or a home directory is never written into.
class RunLock {
 public:
  /// Throws luong::Error("<dir>: in use by process <pid>") when another process holds it.
  explicit RunLock(const std::string& run_dir);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace luong::run
