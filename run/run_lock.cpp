#include "luong/run/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include "luong/util/error.h"

namespace luong::run {
namespace fs = std::filesystem;
namespace {

// Empty (but for a lock or a config.json temporary left by an earlier run), or a run: it has config.json.
void check_directory(const std::string& run_dir) {
  std::error_code ec;
  if (!fs::exists(run_dir, ec)) {
    fs::create_directories(run_dir, ec);
    if (ec) throw Error(printable(run_dir) + ": cannot create the run directory (" + ec.message() + ")");
    return;
  }
  if (!fs::is_directory(run_dir, ec)) throw Error(printable(run_dir) + ": exists and is not a directory");
  if (fs::exists(fs::path(run_dir) / "config.json", ec)) return;
  for (const auto& entry : fs::directory_iterator(run_dir, ec)) {
    // The lock, and a temporary left by a run killed while writing its config.json.
    const std::string name = entry.path().filename().string();
    if (name != ".lock" && name.rfind("config.json.tmp.", 0) != 0) {
      throw Error(printable(run_dir) + ": not empty and not a luong run directory (no config.json); choose another --out");
    }
  }
  if (ec) throw Error(printable(run_dir) + ": cannot list (" + ec.message() + ")");
}

std::string holder(int fd) {
  char text[32] = {};
  const ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
  std::string pid = n > 0 ? std::string(text, static_cast<std::size_t>(n)) : std::string();
  while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
  return pid.empty() ? "unknown" : printable(pid);
}

}  // namespace

RunLock::RunLock(const std::string& run_dir) {
  check_directory(run_dir);
  const std::string path = (fs::path(run_dir) / ".lock").string();
  // The lock is written (its holder's pid): never through a link, nor into a file another name shares.
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd_ < 0 && errno == ELOOP) {
    throw Error(printable(path) + ": is a symbolic link; luong does not write through links in a run directory (remove it)");
  }
  if (fd_ < 0) throw Error(printable(path) + ": cannot open (" + std::strerror(errno) + ")");
  struct stat status {};
  if (::fstat(fd_, &status) != 0 || !S_ISREG(status.st_mode) || status.st_nlink != 1) {
    const bool linked = S_ISREG(status.st_mode) && status.st_nlink > 1;
    ::close(fd_);
    fd_ = -1;
    throw Error(printable(path) + (linked ? ": has " + std::to_string(status.st_nlink) +
                                                " hard links; luong writes its lock only into a file of its own (remove it)"
                                          : std::string(": is not a regular file (remove it)")));
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const std::string pid = holder(fd_);
    ::close(fd_);
    fd_ = -1;
    throw Error(printable(run_dir) + ": in use by process " + pid + " (another luong train); wait for it or choose another --out");
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    ::close(fd_);
    fd_ = -1;
    throw Error(printable(path) + ": cannot write (" + std::strerror(errno) + ")");
  }
}

RunLock::~RunLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the lock
}

}  // namespace luong::run
