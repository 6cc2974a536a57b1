#pragma once
// Crash-safe file writes (a temporary file beside the target, flushed, then renamed over it) and
// bounded reads: nothing luong writes follows a link it was not asked to follow, and nothing it
// reads whole is larger than what the file's format can hold.
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

namespace luong {

/// Who named the file a command writes.
enum class WriteTarget {
  /// A file luong names itself (a run directory's model.pt, loss.csv, .lock, ...): it must be
  /// absent or a regular file; a symbolic link, a FIFO or a device there is refused with one line.
  kOwnFile,
  /// A path the user gave (`trace --csv PATH`): links are followed, and a device or FIFO (/dev/stdout,
  /// /dev/full) is written in place.
  kNamedByUser,
};

/// Calls `write` with a stream on a fresh `<path>.tmp.<pid>.<n>` (created exclusively, never through
/// a link), fsyncs it and renames it to `path`. On any failure the temporary file is removed, the old
/// `path` is untouched and luong::Error is thrown. See WriteTarget for what `path` may be.
void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write,
                           WriteTarget target = WriteTarget::kOwnFile);

/// Throws luong::Error("<path>: is a symbolic link; ...") where `path` is a link, and, unless
/// `directory`, where it exists and is not a regular file; a missing `path` is fine. For the files
/// and directories luong names inside a run directory, before it writes them.
void check_own_path(const std::string& path, bool directory = false);

/// Creates the directory `path` (its parent must exist) or accepts it where it is one already;
/// refuses a link or another kind of file there (check_own_path).
void make_own_directory(const std::string& path);

/// A whole regular file's bytes: nullopt where it does not exist; luong::Error (naming the path and
/// the reason) where it is not a regular file (a FIFO is refused at once rather than waited on, a
/// device or directory too), holds more than `max_bytes` (said as "more than <what> can hold"), or
/// cannot be read. Links are followed: reading cannot harm the file a link points at.
std::optional<std::vector<char>> read_whole_file(const std::string& path, std::uint64_t max_bytes,
                                                 const std::string& what);
/// read_whole_file as text.
std::optional<std::string> read_text_file(const std::string& path, std::uint64_t max_bytes, const std::string& what);

/// Moves a finished temporary file into place with fsync + rename (for writers that need a path);
/// `path` is checked as a WriteTarget::kOwnFile.
void commit_file(const std::string& temporary_path, const std::string& path);

/// A unique temporary name beside `path`: `<path>.tmp.<pid>.<n>`.
std::string temporary_path_for(const std::string& path);

/// Creates `temporary_path_for(path)` empty and exclusively (O_EXCL | O_NOFOLLOW: a name planted
/// there beforehand is an error) for a writer that opens it by name; returns its name.
std::string create_temporary_for(const std::string& path);

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
