#pragma once
#include <cstdint>
#include <string>

namespace luong::test {

inline std::string fixture(const std::string& name) { return std::string(LUONG_SOURCE_DIR) + "/tests/fixtures/" + name; }
/// The interpreter whose torch luong links (.venv/bin/python), for the Python interop tests.
inline std::string python() { return LUONG_PYTHON; }
/// A child's peak resident memory (KiB) that counts as bounded: 1 GiB, and 1.5 GiB more under
/// AddressSanitizer, whose shadow memory and quarantine raise every process's peak.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr long kBoundedPeakKiB = (1024L + 1536L) * 1024L;
#else
inline constexpr long kBoundedPeakKiB = 1024L * 1024L;
#endif
/// A bound for the state dicts the tests read back: far above any test model's.
inline constexpr std::uint64_t kStateDictBytes = std::uint64_t{1} << 30;

inline std::string shared_corpus() { return std::string(LUONG_SHARED_DIR) + "/data/tatoeba-ara-eng/ara-eng.tsv"; }

}  // namespace luong::test
