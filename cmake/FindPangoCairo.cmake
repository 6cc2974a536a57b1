# Finds cairo and pango (with pangocairo) and defines the imported target PangoCairo::PangoCairo.
# pkg-config first; where it does not know them (a prefix of unpacked .deb files on the GPU
# machine, scripts/gpu-check.sh), the headers and libraries are searched for by name under
# CMAKE_PREFIX_PATH.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(PC_PANGOCAIRO QUIET IMPORTED_TARGET pangocairo cairo)
endif()
if(PC_PANGOCAIRO_FOUND)
  add_library(PangoCairo::PangoCairo ALIAS PkgConfig::PC_PANGOCAIRO)
  set(PangoCairo_FOUND TRUE)
  return()
endif()

set(luong_multiarch_lib lib/${CMAKE_LIBRARY_ARCHITECTURE})
find_path(PangoCairo_CAIRO_INCLUDE cairo.h PATH_SUFFIXES cairo)
find_path(PangoCairo_PANGO_INCLUDE pango/pangocairo.h PATH_SUFFIXES pango-1.0)
find_path(PangoCairo_GLIB_INCLUDE glib.h PATH_SUFFIXES glib-2.0)
find_path(PangoCairo_GLIBCONFIG_INCLUDE glibconfig.h PATH_SUFFIXES ${luong_multiarch_lib}/glib-2.0/include lib/glib-2.0/include)
find_path(PangoCairo_HARFBUZZ_INCLUDE hb.h PATH_SUFFIXES harfbuzz)
set(PangoCairo_LIBRARIES "")
foreach(name pangocairo-1.0 pango-1.0 gobject-2.0 glib-2.0 cairo)
  string(MAKE_C_IDENTIFIER "${name}" id)
  find_library(PangoCairo_LIB_${id} ${name})
  list(APPEND PangoCairo_LIBRARIES ${PangoCairo_LIB_${id}})
  list(APPEND luong_pangocairo_required PangoCairo_LIB_${id})
endforeach()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(PangoCairo REQUIRED_VARS PangoCairo_CAIRO_INCLUDE PangoCairo_PANGO_INCLUDE
                                  PangoCairo_GLIB_INCLUDE PangoCairo_GLIBCONFIG_INCLUDE PangoCairo_HARFBUZZ_INCLUDE
                                  ${luong_pangocairo_required})
if(PangoCairo_FOUND AND NOT TARGET PangoCairo::PangoCairo)
  add_library(PangoCairo::PangoCairo INTERFACE IMPORTED)
  set_target_properties(PangoCairo::PangoCairo PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${PangoCairo_CAIRO_INCLUDE};${PangoCairo_PANGO_INCLUDE};${PangoCairo_GLIB_INCLUDE};${PangoCairo_GLIBCONFIG_INCLUDE};${PangoCairo_HARFBUZZ_INCLUDE}"
    INTERFACE_LINK_LIBRARIES "${PangoCairo_LIBRARIES}")
endif()
