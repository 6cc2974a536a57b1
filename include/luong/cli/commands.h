#pragma once
// The `luong` subcommands. Each parses its own options and returns the process exit status:
// 0 success, 1 usage error, 2 bad input (luong::Error), 3 failed check (gradcheck past tolerance).

namespace luong::cli {

int train_command(int argc, char** argv);
int evaluate_command(int argc, char** argv);
int translate_command(int argc, char** argv);
int trace_command(int argc, char** argv);
int cloze_command(int argc, char** argv);
int gradcheck_command(int argc, char** argv);

}  // namespace luong::cli
