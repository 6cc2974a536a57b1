#pragma once
#include <string>

namespace luong::test {

inline std::string fixture(const std::string& name) { return std::string(LUONG_SOURCE_DIR) + "/tests/fixtures/" + name; }
/// The interpreter whose torch luong links (.venv/bin/python), for the Python interop tests.
inline std::string python() { return LUONG_PYTHON; }
inline std::string shared_corpus() { return std::string(LUONG_SHARED_DIR) + "/data/tatoeba-ara-eng/ara-eng.tsv"; }

}  // namespace luong::test
