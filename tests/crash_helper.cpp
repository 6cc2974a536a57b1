// luong_crash_helper N ARGS...: runs `luong ARGS...` (train) with the crash-test hook installed, and
// SIGKILLs itself at the N-th save point. The only program that installs the hook
// (luong/util/crash_test_hooks.h); reliability_test.cpp walks N over every save point.
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <iostream>

#include "luong/cli/commands.h"
#include "luong/cli/option_flags.h"
#include "luong/util/crash_test_hooks.h"

int main(int argc, char** argv) {
  if (argc < 3 || std::strcmp(argv[2], "train") != 0) {
    std::cerr << "usage: luong_crash_helper N train [options]" << std::endl;
    return 2;
  }
  const long target = std::strtol(argv[1], nullptr, 10);
  long reached = 0;
  luong::crash_test::set_save_point_hook([&] {
    if (++reached == target) ::kill(::getpid(), SIGKILL);
  });
  try {
    return luong::cli::train_command(argc - 2, argv + 2);
  } catch (...) {
    return luong::cli::report_failure("train", luong::cli::describe_current_exception());
  }
}
