#include "luong/util/module_path.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>

namespace luong {

std::vector<std::string> module_candidates(const std::string& file_name, const char* env_var,
                                           const std::string& install_dir) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  if (const char* env = std::getenv(env_var)) out.emplace_back(env);
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    out.push_back((exe.parent_path() / file_name).string());
    out.push_back((exe.parent_path().parent_path() / file_name).string());
    out.push_back((exe.parent_path().parent_path() / "lib" / file_name).string());
  }
  out.push_back(install_dir + "/" + file_name);
  return out;
}

void* open_module(const std::string& file_name, const char* env_var, const std::string& install_dir, int flags,
                  std::string& failure) {
  std::string tried;
  for (const std::string& path : module_candidates(file_name, env_var, install_dir)) {
    if (!std::filesystem::exists(path)) {
      tried += " " + path;
      continue;
    }
    if (void* handle = ::dlopen(path.c_str(), flags)) return handle;
    tried += " " + path + " (" + ::dlerror() + ")";
  }
  failure = "cannot load " + file_name + "; tried" + tried;
  return nullptr;
}

}  // namespace luong
