#pragma once
// Crash-safe file writes: a temporary file beside the target, flushed, then renamed over it.
#include <functional>
#include <iosfwd>
#include <string>

namespace luong {

/// Calls `write` with a stream on `<path>.tmp.<pid>`, fsyncs it and renames it to `path`. On any
/// failure the temporary file is removed, the old `path` is untouched and luong::Error is thrown.
void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write);

/// Moves a finished temporary file into place with fsync + rename (for writers that need a path).
void commit_file(const std::string& temporary_path, const std::string& path);

/// A unique temporary name beside `path`: `<path>.tmp.<pid>.<n>`.
std::string temporary_path_for(const std::string& path);

/// Removes the temporary files and directories in `directory` that processes no longer running
/// left behind (a run killed while saving). Returns how many it removed.
int remove_stale_temporaries(const std::string& directory);

/// Crash-safety tests set LUONG_KILL_AT=N to have the process SIGKILL itself at the N-th kill
/// point (counted from 1): one between every two steps of a save, so that each state a crash can
/// leave on disk gets tested. Does nothing when the variable is unset.
void kill_point();

}  // namespace luong
