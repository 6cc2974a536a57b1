#pragma once
// Reading back what a `luong` run wrote.
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "luong/models/state_dict.h"
#include "test_paths.h"

namespace luong::test {

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// Every file under `dir` and its bytes, but for the run lock (.lock records its last holder's PID).
inline std::map<std::string, std::string> snapshot(const std::string& dir) {
  namespace fs = std::filesystem;
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file() && entry.path().filename() != ".lock") {
      files[fs::relative(entry.path(), dir).string()] = read_file(entry.path().string());
    }
  }
  return files;
}

/// Whether two state_dict files hold the same names and bit-identical tensors.
inline bool same_weights(const std::string& a, const std::string& b) {
  const auto x = models::read_state_dict(a, test::kStateDictBytes), y = models::read_state_dict(b, test::kStateDictBytes);
  if (x.size() != y.size()) return false;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (x[i].first != y[i].first || !x[i].second.equal(y[i].second)) return false;
  }
  return true;
}

}  // namespace luong::test
