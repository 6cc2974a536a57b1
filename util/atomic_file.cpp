#include "luong/util/atomic_file.h"

#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <ostream>
#include <streambuf>

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

// ---- bounded reads ---------------------------------------------------------------------------------

namespace {

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

[[noreturn]] void too_large(const std::string& path, std::uint64_t max_bytes, const std::string& what) {
  throw Error(printable(path) + ": larger than " + std::to_string(max_bytes) + " bytes, more than " + what +
              " can hold (is it the right file?)");
}

// Appends a regular file's bytes to `bytes` (empty on entry); false where `path` does not exist.
template <typename Bytes>
bool read_bounded(const std::string& path, std::uint64_t max_bytes, const std::string& what, Bytes& bytes) {
  // O_NONBLOCK: opening a FIFO with no writer returns at once, so that fstat can refuse it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    if (errno == ENOENT) return false;
    throw Error(printable(path) + ": cannot open (" + std::strerror(errno) + ")");
  }
  struct stat status {};
  if (::fstat(fd, &status) != 0) {
    const int error = errno;
    ::close(fd);
    throw Error(printable(path) + ": cannot read (" + std::strerror(error) + ")");
  }
  if (!S_ISREG(status.st_mode)) {
    ::close(fd);
    throw Error(printable(path) + ": cannot read (" + kind_of(status.st_mode) + ", not a regular file)");
  }
  const auto size = static_cast<std::uint64_t>(status.st_size);
  if (size > max_bytes) {
    ::close(fd);
    too_large(path, max_bytes, what);
  }
  // A regular file's size is known (but /proc's, which read as 0): one byte more than it confirms the end.
  bytes.resize(static_cast<std::size_t>(size) + 1);
  std::size_t done = 0;
  for (;;) {
    if (done == bytes.size()) {
      if (done > max_bytes) break;
      bytes.resize(static_cast<std::size_t>(std::min<std::uint64_t>(2 * bytes.size() + 65536, max_bytes + 1)));
    }
    const ssize_t got = ::read(fd, &bytes[done], bytes.size() - done);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      const int error = errno;
      ::close(fd);
      throw Error(printable(path) + ": cannot read (" + std::strerror(error) + ")");
    }
    if (got == 0) break;
    done += static_cast<std::size_t>(got);
  }
  ::close(fd);
  if (done > max_bytes) too_large(path, max_bytes, what);  // it grew while read
  bytes.resize(done);
  return true;
}

}  // namespace

std::optional<std::vector<char>> read_whole_file(const std::string& path, std::uint64_t max_bytes,
                                                 const std::string& what) {
  std::vector<char> bytes;
  if (!read_bounded(path, max_bytes, what, bytes)) return std::nullopt;
  return bytes;
}

std::optional<std::string> read_text_file(const std::string& path, std::uint64_t max_bytes, const std::string& what) {
  std::string text;
  if (!read_bounded(path, max_bytes, what, text)) return std::nullopt;
  return text;
}

// ---- writes that follow no link ----------------------------------------------------------------------

namespace {

// An output stream's buffer over a file descriptor it owns, every write checked: the stream fails
// with the first error, and close() reports one that only the last write or close met.
class DescriptorBuffer : public std::streambuf {
 public:
  explicit DescriptorBuffer(int fd) : fd_(fd) { setp(buffer_, buffer_ + sizeof buffer_); }
  ~DescriptorBuffer() override { close(); }
  DescriptorBuffer(const DescriptorBuffer&) = delete;
  DescriptorBuffer& operator=(const DescriptorBuffer&) = delete;

  // The first error's errno, or 0.
  int close() {
    if (fd_ >= 0) {
      if (!drain() && error_ == 0) error_ = EIO;
      if (::close(fd_) != 0 && error_ == 0) error_ = errno;
      fd_ = -1;
    }
    return error_;
  }

 protected:
  int_type overflow(int_type c) override {
    if (!drain()) return traits_type::eof();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }
  int sync() override { return drain() ? 0 : -1; }

 private:
  bool drain() {
    const char* data = pbase();
    std::size_t left = static_cast<std::size_t>(pptr() - pbase());
    while (left > 0 && error_ == 0) {
      const ssize_t wrote = ::write(fd_, data, left);
      if (wrote < 0 && errno == EINTR) continue;
      if (wrote < 0) error_ = errno;
      else {
        data += wrote;
        left -= static_cast<std::size_t>(wrote);
      }
    }
    setp(buffer_, buffer_ + sizeof buffer_);
    return error_ == 0;
  }

  int fd_;
  int error_ = 0;
  char buffer_[1 << 16];
};

// Runs `write` into a descriptor that it then closes; throws naming `path` on any error.
void write_through(int fd, const std::string& path, const std::function<void(std::ostream&)>& write) {
  DescriptorBuffer buffer(fd);
  std::ostream out(&buffer);
  write(out);
  out.flush();
  const int error = buffer.close();
  if (!out || error != 0) throw Error(printable(path) + ": write failed (" + std::strerror(error != 0 ? error : EIO) + ")");
}

int create_exclusively(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(printable(path) + ": cannot create (" + std::strerror(errno) + ")");
  return fd;
}

}  // namespace

void check_own_path(const std::string& path, bool directory) {
  struct stat status {};
  if (::lstat(path.c_str(), &status) != 0) return;  // absent (or unreachable: the write will say)
  if (S_ISLNK(status.st_mode)) {
    throw Error(printable(path) + ": is a symbolic link; luong does not write through links in a run directory (remove it)");
  }
  if (directory ? !S_ISDIR(status.st_mode) : !S_ISREG(status.st_mode)) {
    throw Error(printable(path) + ": is " + (S_ISDIR(status.st_mode) ? "a directory" : kind_of(status.st_mode)) +
                ", where luong writes its own " + (directory ? "directory" : "file"));
  }
}

void make_own_directory(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) == 0) return;
  if (errno != EEXIST) throw Error(printable(path) + ": cannot create the directory (" + std::strerror(errno) + ")");
  check_own_path(path, /*directory=*/true);
}

std::string temporary_path_for(const std::string& path) {
  static std::atomic<int> counter{0};
  return path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
}

std::string create_temporary_for(const std::string& path) {
  const std::string temporary = temporary_path_for(path);
  ::close(create_exclusively(temporary));
  return temporary;
}

void commit_file(const std::string& temporary_path, const std::string& path) {
  fsync_path(temporary_path);
  crash_test::save_point();
  check_own_path(path);
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

void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write, WriteTarget target) {
  if (target == WriteTarget::kOwnFile) {
    check_own_path(path);
  } else {
    // A device or pipe the user named (/dev/stdout, /dev/full, a FIFO) is written in place: a
    // temporary beside it renamed over it would replace the device node.
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (!ec && std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
      if (std::filesystem::is_directory(status)) throw Error(printable(path) + ": is a directory");
      const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
      if (fd < 0) throw Error(printable(path) + ": cannot open for writing (" + std::strerror(errno) + ")");
      write_through(fd, path, write);
      return;
    }
  }
  const std::string temporary = temporary_path_for(path);
  try {
    write_through(create_exclusively(temporary), path, write);
  } catch (...) {
    std::remove(temporary.c_str());
    throw;
  }
  commit_file(temporary, path);
}

}  // namespace luong
