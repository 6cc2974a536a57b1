#pragma once
// Finding luong's own dlopen()ed modules (the sentencepiece shim, the LibTorch commands).
#include <string>
#include <vector>

namespace luong {

/// Where to look for `file_name`, in order: $<env_var> (a full path), the running executable's
/// directory, its parent, the parent's lib/, and `install_dir`.
std::vector<std::string> module_candidates(const std::string& file_name, const char* env_var,
                                           const std::string& install_dir);

}  // namespace luong
