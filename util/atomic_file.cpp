#include "luong/util/atomic_file.h"

#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "luong/util/crash_test_hooks.h"
#include "luong/util/error.h"

namespace luong {
namespace {

void fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

namespace crash_test {
namespace {
std::function<void()>& hook() {
  static std::function<void()> installed;
  return installed;
}
}  // namespace

void set_save_point_hook(std::function<void()> installed) { hook() = std::move(installed); }

void save_point() {
  if (hook()) hook()();
}
}  // namespace crash_test

namespace {
thread_local int tree_error = 0;  // nftw's callback takes no context

int remove_entry(const char* path, const struct stat*, int, struct FTW*) {
  if (::remove(path) != 0 && errno != ENOENT) {
    tree_error = errno;
    return 1;
  }
  return 0;
}
}  // namespace

std::error_code remove_tree(const std::string& path) {
  tree_error = 0;
  if (::nftw(path.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0) {
    if (tree_error == 0 && errno != ENOENT) tree_error = errno;
  }
  return {tree_error, std::generic_category()};
}

int remove_stale_temporaries(const std::string& directory) {
  namespace fs = std::filesystem;
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(directory, ec)) {
    // <name>.tmp.<pid>.<n>
    const std::string name = entry.path().filename().string();
    const std::size_t tmp = name.rfind(".tmp.");
    if (tmp == std::string::npos) continue;
    char* end = nullptr;
    const long pid = std::strtol(name.c_str() + tmp + 5, &end, 10);
    if (pid <= 0 || *end != '.' || std::strspn(end + 1, "0123456789") != std::strlen(end + 1)) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // its writer may still be alive
    if (!remove_tree(entry.path().string())) ++removed;
  }
  return removed;
}

std::optional<std::vector<char>> read_whole_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat status {};
  // A regular file's size is known; a pipe's grows as it comes.
  const std::size_t expected =
      ::fstat(fd, &status) == 0 && S_ISREG(status.st_mode) ? static_cast<std::size_t>(status.st_size) : 0;
  std::vector<char> bytes(expected + 1);  // one byte more: a read of 0 there confirms the end
  std::size_t size = 0;
  for (;;) {
    if (size == bytes.size()) bytes.resize(2 * bytes.size() + 65536);
    const ssize_t got = ::read(fd, bytes.data() + size, bytes.size() - size);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      const int error = errno;
      ::close(fd);
      throw Error(printable(path) + ": cannot read (" + std::strerror(error) + ")");
    }
    if (got == 0) break;
    size += static_cast<std::size_t>(got);
  }
  ::close(fd);
  bytes.resize(size);
  return bytes;
}

std::string temporary_path_for(const std::string& path) {
  static std::atomic<int> counter{0};
  return path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
}

void commit_file(const std::string& temporary_path, const std::string& path) {
  fsync_path(temporary_path);
  crash_test::save_point();
  std::error_code ec;
  std::filesystem::rename(temporary_path, path, ec);
  if (ec) {
    std::filesystem::remove(temporary_path, ec);
    throw Error(printable(path) + ": cannot write (" + ec.message() + ")");
  }
  const std::string directory = std::filesystem::absolute(path).parent_path().string();
  fsync_path(directory);
  crash_test::save_point();
}

namespace {

// Writes `write`'s bytes into an open stream and checks every step.
void write_checked(std::ofstream& out, const std::string& path, const std::function<void(std::ostream&)>& write) {
  if (!out) throw Error(printable(path) + ": cannot open for writing (" + std::strerror(errno) + ")");
  write(out);
  out.flush();
  if (!out) throw Error(printable(path) + ": write failed (" + std::strerror(errno) + ")");
  out.close();
  if (out.fail()) throw Error(printable(path) + ": write failed (" + std::strerror(errno) + ")");
}

}  // namespace

void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write) {
  // A device or pipe (/dev/stdout, /dev/full, a FIFO) is written in place: a temporary beside it
  // renamed over it would replace the device node.
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (!ec && std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
    if (std::filesystem::is_directory(status)) throw Error(printable(path) + ": is a directory");
    std::ofstream out(path, std::ios::binary);
    write_checked(out, path, write);
    return;
  }
  const std::string temporary = temporary_path_for(path);
  try {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    write_checked(out, path, write);
  } catch (...) {
    std::remove(temporary.c_str());
    throw;
  }
  commit_file(temporary, path);
}

}  // namespace luong
