#pragma once
// Finding luong's own dlopen()ed modules (the sentencepiece shim, the LibTorch commands, the CUDA module).
#include <string>
#include <vector>

namespace luong {

/// Where to look for `file_name`, in order: $<env_var> (a full path), the running executable's
/// directory, its parent, the parent's lib/, and `install_dir`.
std::vector<std::string> module_candidates(const std::string& file_name, const char* env_var,
                                           const std::string& install_dir);

/// dlopen()s the first of module_candidates() that exists, with `flags`. Returns the handle, or null
/// with `failure` set to "cannot load <file_name>; tried <each path, and why where it exists>".
void* open_module(const std::string& file_name, const char* env_var, const std::string& install_dir, int flags,
                  std::string& failure);

}  // namespace luong
