#pragma once
// Shared by the libFuzzer targets: a rejected input must surface as luong::Error (the one-line
// message the CLI prints); anything else -- another exception, a crash, a leak, a broken
// invariant -- is a finding.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "luong/util/error.h"

#define LUONG_FUZZ_CHECK(condition)                                                   \
  do {                                                                                \
    if (!(condition)) {                                                               \
      std::fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, #condition); \
      std::abort();                                                                   \
    }                                                                                 \
  } while (0)

namespace luong::fuzz {

/// Runs `body`, accepting luong::Error (whose message must be one non-empty line).
template <typename Body>
void expect_clean(Body&& body) {
  try {
    body();
  } catch (const Error& e) {
    const std::string what = e.what();
    if (what.empty() || what.find('\n') != std::string::npos) {
      std::fprintf(stderr, "error message is not one line: [%s]\n", what.c_str());
      std::abort();
    }
  }
}

}  // namespace luong::fuzz
