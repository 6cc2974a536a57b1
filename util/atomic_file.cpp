#include "luong/util/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

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

void kill_point() {
  static const long target = [] {
    const char* value = std::getenv("LUONG_KILL_AT");
    return value != nullptr ? std::strtol(value, nullptr, 10) : 0L;
  }();
  static std::atomic<long> reached{0};
  if (target > 0 && ++reached == target) ::kill(::getpid(), SIGKILL);
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
    std::error_code remove_error;
    fs::remove_all(entry.path(), remove_error);
    if (!remove_error) ++removed;
  }
  return removed;
}

std::string temporary_path_for(const std::string& path) {
  static std::atomic<int> counter{0};
  return path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
}

void commit_file(const std::string& temporary_path, const std::string& path) {
  fsync_path(temporary_path);
  kill_point();
  std::error_code ec;
  std::filesystem::rename(temporary_path, path, ec);
  if (ec) {
    std::filesystem::remove(temporary_path, ec);
    throw Error(path + ": cannot write (" + ec.message() + ")");
  }
  const std::string directory = std::filesystem::absolute(path).parent_path().string();
  fsync_path(directory);
  kill_point();
}

void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write) {
  const std::string temporary = temporary_path_for(path);
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(path + ": cannot open for writing");
    try {
      write(out);
    } catch (...) {
      out.close();
      std::remove(temporary.c_str());
      throw;
    }
    out.flush();
    if (!out) {
      out.close();
      std::remove(temporary.c_str());
      throw Error(path + ": write failed (disk full?)");
    }
  }
  commit_file(temporary, path);
}

}  // namespace luong
