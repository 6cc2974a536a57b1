#pragma once
// Where and how a command runs: the device, the thread pools and determinism. Every command that
// runs a model takes these flags; training records them in config.json (--resume may change them).
#include <cstdint>
#include <string>

#include "luong/util/options.h"

// X(type, name, default, flag, group, help, range, on_resume): see luong/util/options.h.
#define LUONG_RUNTIME_OPTIONS(X)                                                                               \
  X(std::string, device, "cpu", "device", "runtime", "cpu or cuda[:N]", ::luong::options::kAnyValue, kMayChange) \
  X(std::int64_t, threads, 0, "threads",                                                                         \
    "runtime", "LibTorch intra-op threads (0 = the cores this process may use; any BLAS's own pool gets 1)",     \
    ::luong::options::closed(0, 1024), kMayChange)                                                                \
  X(bool, deterministic, false, "deterministic", "runtime",                                                     \
    "repeatable GPU runs: deterministic cuDNN and cuBLAS algorithms (slower)", ::luong::options::kAnyValue,      \
    kMayChange)

namespace luong::run {

struct RuntimeOptions {
  LUONG_OPTIONS_STRUCT_BODY(LUONG_RUNTIME_OPTIONS)
};

}  // namespace luong::run
