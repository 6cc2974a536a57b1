#include "luong/util/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
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

std::string temporary_path_for(const std::string& path) {
  static std::atomic<int> counter{0};
  return path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
}

void commit_file(const std::string& temporary_path, const std::string& path) {
  fsync_path(temporary_path);
  std::error_code ec;
  std::filesystem::rename(temporary_path, path, ec);
  if (ec) {
    std::filesystem::remove(temporary_path, ec);
    throw Error(path + ": cannot write (" + ec.message() + ")");
  }
  const std::string directory = std::filesystem::absolute(path).parent_path().string();
  fsync_path(directory);
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
