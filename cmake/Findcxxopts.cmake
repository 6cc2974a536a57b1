# Finds the header-only cxxopts (Debian's libcxxopts-dev ships no CMake config).
# Defines cxxopts::cxxopts.
find_package(cxxopts CONFIG QUIET)
if(NOT TARGET cxxopts::cxxopts)
  find_path(cxxopts_INCLUDE_DIR cxxopts.hpp)
  include(FindPackageHandleStandardArgs)
  find_package_handle_standard_args(cxxopts REQUIRED_VARS cxxopts_INCLUDE_DIR)
  if(cxxopts_FOUND)
    add_library(cxxopts::cxxopts INTERFACE IMPORTED)
    set_target_properties(cxxopts::cxxopts PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${cxxopts_INCLUDE_DIR}")
  endif()
endif()
