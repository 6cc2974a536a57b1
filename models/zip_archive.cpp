#include "luong/models/zip_archive.h"

#include <zlib.h>

#include "luong/util/error.h"

namespace luong::models {
namespace {

constexpr std::uint32_t kEndOfDirectory = 0x06054b50;
constexpr std::uint32_t kDirectoryEntry = 0x02014b50;
constexpr std::uint32_t kLocalHeader = 0x04034b50;
constexpr std::size_t kEndOfDirectorySize = 22;
constexpr std::size_t kDirectoryEntrySize = 46;
constexpr std::size_t kLocalHeaderSize = 30;

// Little-endian fields of a byte buffer, bounds-checked by the caller.
std::uint32_t u16(const std::vector<char>& b, std::size_t at) {
  return static_cast<std::uint32_t>(static_cast<unsigned char>(b[at])) |
         static_cast<std::uint32_t>(static_cast<unsigned char>(b[at + 1])) << 8;
}
std::uint32_t u32(const std::vector<char>& b, std::size_t at) { return u16(b, at) | u16(b, at + 2) << 16; }

}  // namespace

ZipArchive::ZipArchive(const std::vector<char>& bytes, std::string origin) : bytes_(bytes), origin_(std::move(origin)) {
  const auto fail = [&](const std::string& what) -> void {
    throw CheckpointError(origin_ + ": corrupt or truncated checkpoint (" + what + ")");
  };
  const std::size_t n = bytes.size();
  if (n < kEndOfDirectorySize) fail("too short for a zip archive");
  // The end-of-directory record sits at the end, before a comment of at most 65535 bytes.
  std::size_t end = n - kEndOfDirectorySize + 1;
  const std::size_t lowest = n > kEndOfDirectorySize + 65535 ? n - kEndOfDirectorySize - 65535 : 0;
  bool found = false;
  while (end-- > lowest) {
    if (u32(bytes, end) == kEndOfDirectory && end + kEndOfDirectorySize + u16(bytes, end + 20) == n) {
      found = true;
      break;
    }
  }
  if (!found) fail("no zip end-of-directory record");
  const std::uint32_t entries = u16(bytes, end + 10);
  const std::uint64_t directory_size = u32(bytes, end + 12);
  const std::uint64_t directory_offset = u32(bytes, end + 16);
  if (entries == 0xFFFF || directory_offset == 0xFFFFFFFFu) fail("zip64 archives (over 4 GiB) are not supported");
  if (u16(bytes, end + 4) != 0 || u16(bytes, end + 6) != 0) fail("multi-disk zip archive");
  if (directory_offset + directory_size > end) fail("zip directory outside the file");

  std::string folder;
  std::size_t at = directory_offset;
  for (std::uint32_t i = 0; i < entries; ++i) {
    if (at + kDirectoryEntrySize > end || u32(bytes, at) != kDirectoryEntry) fail("bad zip directory entry");
    const std::uint32_t flags = u16(bytes, at + 8);
    const std::uint32_t method = u16(bytes, at + 10);
    Record record;
    record.crc32 = u32(bytes, at + 16);
    const std::uint64_t compressed = u32(bytes, at + 20);
    record.size = u32(bytes, at + 24);
    const std::size_t name_length = u16(bytes, at + 28);
    const std::size_t extra_length = u16(bytes, at + 30);
    const std::size_t comment_length = u16(bytes, at + 32);
    const std::uint64_t header = u32(bytes, at + 42);
    const std::size_t next = at + kDirectoryEntrySize + name_length + extra_length + comment_length;
    if (next > end) fail("bad zip directory entry");
    std::string name(bytes.data() + at + kDirectoryEntrySize, name_length);
    const std::string shown = printable(name);
    if (method != 0 || compressed != record.size) fail("compressed record " + shown + " (torch.save stores records)");
    if (flags & 1) fail("encrypted record " + shown);
    if (record.size == 0xFFFFFFFFu || header == 0xFFFFFFFFu) fail("zip64 archives (over 4 GiB) are not supported");
    if (header + kLocalHeaderSize > n || u32(bytes, header) != kLocalHeader) fail("bad local header of " + shown);
    record.offset = header + kLocalHeaderSize + u16(bytes, header + 26) + u16(bytes, header + 28);
    if (record.offset + record.size > n) fail("record " + shown + " runs past the end of the file");
    // Every record lives under the archive's one top-level folder ("archive/data.pkl").
    const std::size_t slash = name.find('/');
    if (slash == std::string::npos || slash == 0) fail("record " + shown + " is outside the archive folder");
    if (i == 0) folder = name.substr(0, slash);
    if (name.compare(0, slash, folder) != 0) fail("records in two top-level folders");
    if (!records_.emplace(name.substr(slash + 1), record).second) fail("duplicate record " + shown);
    at = next;
  }
}

std::string_view ZipArchive::get(const std::string& name) const {
  const auto found = records_.find(name);
  if (found == records_.end()) throw CheckpointError(origin_ + ": corrupt or truncated checkpoint (no record " + name + ")");
  const Record& r = found->second;
  const char* data = bytes_.data() + r.offset;
  uLong crc = crc32(0L, Z_NULL, 0);
  for (std::uint64_t done = 0; done < r.size;) {
    const uInt chunk = static_cast<uInt>(std::min<std::uint64_t>(r.size - done, 1u << 30));
    crc = crc32(crc, reinterpret_cast<const Bytef*>(data + done), chunk);
    done += chunk;
  }
  if (crc != r.crc32) throw CheckpointError(origin_ + ": corrupt checkpoint (CRC mismatch in " + name + ")");
  return {data, static_cast<std::size_t>(r.size)};
}

}  // namespace luong::models
