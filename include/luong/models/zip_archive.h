#pragma once
// A reader for the zip container of torch.save / torch::pickle_save files: uncompressed (stored)
// records under one top-level folder. Written here rather than taken from LibTorch because
// caffe2's PyTorchStreamReader leaks its miniz state when a corrupt archive makes its constructor
// throw, and reads sizes from the file before checking them.
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace luong::models {

class ZipArchive {
 public:
  /// Indexes the archive in `bytes` (which must outlive it). Throws CheckpointError naming
  /// `origin` for anything malformed: no end-of-directory record, entries outside the file,
  /// compressed or encrypted records, zip64, duplicate names.
  ZipArchive(const std::vector<char>& bytes, std::string origin);

  /// `name` without the archive's top-level folder, e.g. "data.pkl" or "data/0".
  bool has(const std::string& name) const { return records_.count(name) > 0; }

  /// The record's bytes, after checking its CRC-32. Throws CheckpointError if absent or corrupt.
  std::string_view get(const std::string& name) const;

 private:
  struct Record {
    std::uint64_t offset = 0;  // of the data, from the start of the file
    std::uint64_t size = 0;
    std::uint32_t crc32 = 0;
  };
  const std::vector<char>& bytes_;
  std::string origin_;
  std::unordered_map<std::string, Record> records_;
};

}  // namespace luong::models
