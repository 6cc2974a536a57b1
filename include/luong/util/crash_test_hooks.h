#pragma once
// Test-only: the crash-safety tests install a function that every save calls at each point where a
// crash would leave a distinct state on disk (between a file's write and its rename, between the
// checkpoint's files, around the directory exchange). tests/crash_helper.cpp kills itself there with
// SIGKILL; the product never installs one, so save_point() costs one load of a null pointer.
#include <functional>

namespace luong::crash_test {

/// Installs `hook` (empty: removes it). Not thread-safe: call before any save.
void set_save_point_hook(std::function<void()> hook);

/// Called by the savers at each crash point.
void save_point();

}  // namespace luong::crash_test
