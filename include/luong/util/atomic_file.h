#pragma once
// Crash-safe file writes: a temporary file beside the target, flushed, then renamed over it.
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

namespace luong {

/// Calls `write` with a stream on `<path>.tmp.<pid>`, fsyncs it and renames it to `path`. On any
/// failure the temporary file is removed, the old `path` is untouched and luong::Error is thrown.
/// A `path` that exists and is not a regular file (a device, a FIFO) is written in place, with every
/// write checked.
void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write);

/// A whole file's bytes, read in as few calls as its size allows (a stream iterator took 0.19 s for a
/// hidden-512 model's 69 MB, this 0.05); nullopt where it cannot be opened; luong::Error (naming
/// the path and the reason) where reading fails, a directory's for one.
std::optional<std::vector<char>> read_whole_file(const std::string& path);

/// Moves a finished temporary file into place with fsync + rename (for writers that need a path).
void commit_file(const std::string& temporary_path, const std::string& path);

/// A unique temporary name beside `path`: `<path>.tmp.<pid>.<n>`.
std::string temporary_path_for(const std::string& path);

/// Removes `path` and, for a directory, everything under it, without following links; a missing
/// `path` is no error. Instead of std::filesystem::remove_all: the PyPI LibTorch exports a copy of
/// libstdc++'s filesystem code whose remove_all calls recursive_directory_iterator::__erase through
/// an unresolved weak reference, and a luong built with GCC 13 binds to that copy (a null call on
/// Ubuntu 24.04).
std::error_code remove_tree(const std::string& path);

/// Removes the temporary files and directories in `directory` that processes no longer running
/// left behind (a run killed while saving). Returns how many it removed.
int remove_stale_temporaries(const std::string& directory);

}  // namespace luong
