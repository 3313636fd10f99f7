cmake_minimum_required(VERSION 3.25)
# cmake -DSOURCE_DIR=<src> -DLAYERS_FILE=<build>/layers.cmake -P check_layering.cmake
# Fails when a file of layer L includes "uswap/<M>/..." and M is not among L's declared
# (transitive) dependencies: a lower layer must never include a higher one.
include(${LAYERS_FILE})
set(violations 0)
foreach(layer IN LISTS USWAP_LAYERS)
  file(GLOB_RECURSE files
       ${SOURCE_DIR}/include/uswap/${layer}/*.h
       ${SOURCE_DIR}/src/${layer}/*.h ${SOURCE_DIR}/src/${layer}/*.cc)
  foreach(f IN LISTS files)
    file(STRINGS ${f} lines REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]uswap/")
    foreach(line IN LISTS lines)
      string(REGEX MATCH "uswap/([a-z_0-9]+)/" _ "${line}")
      set(target_layer ${CMAKE_MATCH_1})
      if(target_layer AND NOT target_layer IN_LIST USWAP_ALLOWED_${layer})
        message(SEND_ERROR "${f}: layer '${layer}' includes layer '${target_layer}', "
                           "which it does not declare (allowed: ${USWAP_ALLOWED_${layer}})")
        math(EXPR violations "${violations} + 1")
      endif()
    endforeach()
  endforeach()
endforeach()
if(violations GREATER 0)
  message(FATAL_ERROR "${violations} layering violation(s)")
endif()
list(LENGTH USWAP_LAYERS n)
message(STATUS "layering: ${n} layers checked, no violations")
