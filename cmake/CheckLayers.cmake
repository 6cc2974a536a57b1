# luong_check_layers(SOURCE_DIR): every source and header of a layer may include luong headers of its
# own layer and of the layers below it, nothing else; a violation stops the configuration with the
# file, the line and the rule. Run as a script too (cmake -DSOURCE_DIR=... -P CheckLayers.cmake),
# which the test suite does.
#
# layer          its sources                      may include luong/...
cmake_policy(SET CMP0057 NEW)
set(LUONG_LAYERS
  "util|util include/luong/util|util"
  "data_pipeline|data_pipeline include/luong/data_pipeline|util data_pipeline"
  "models|models include/luong/models|util data_pipeline models"
  "cloze|models/cloze include/luong/cloze|util cloze"
  "run|run include/luong/run|util data_pipeline models run"
  "evaluation|evaluation include/luong/evaluation|util data_pipeline models run evaluation"
  "serve|serve include/luong/serve|util data_pipeline models run evaluation serve"
  "training|training include/luong/training|util data_pipeline models run evaluation training"
  "cli|src include/luong/cli|util data_pipeline models cloze run evaluation serve training cli")

function(luong_check_layers source_dir)
  set(violations "")
  foreach(layer IN LISTS LUONG_LAYERS)
    string(REPLACE "|" ";" fields "${layer}")
    list(GET fields 0 name)
    list(GET fields 1 dirs)
    list(GET fields 2 allowed)
    string(REPLACE " " ";" dirs "${dirs}")
    string(REPLACE " " ";" allowed "${allowed}")
    set(files "")
    foreach(dir IN LISTS dirs)
      file(GLOB found "${source_dir}/${dir}/*.cpp" "${source_dir}/${dir}/*.h" "${source_dir}/${dir}/*/*.cpp"
           "${source_dir}/${dir}/*/*.h")
      list(APPEND files ${found})
    endforeach()
    foreach(file IN LISTS files)
      # models/cloze is its own layer, not part of models
      if(name STREQUAL "models" AND file MATCHES "/models/cloze/")
        continue()
      endif()
      file(STRINGS "${file}" includes REGEX "^#include \"luong/[a-z_]+/")
      foreach(line IN LISTS includes)
        string(REGEX REPLACE "^#include \"luong/([a-z_]+)/.*" "\\1" target "${line}")
        if(NOT target IN_LIST allowed)
          file(RELATIVE_PATH relative "${source_dir}" "${file}")
          string(APPEND violations "\n  ${relative}: ${line} (layer ${name} may include only: ${allowed})")
        endif()
      endforeach()
    endforeach()
  endforeach()
  if(violations)
    message(FATAL_ERROR "layer violations (docs/ARCHITECTURE.md):${violations}")
  endif()
endfunction()

if(CMAKE_SCRIPT_MODE_FILE AND SOURCE_DIR)
  luong_check_layers("${SOURCE_DIR}")
  message(STATUS "layers: no violations")
endif()
