# Helpers that give every layer the same shape: a static library uswap_<layer>, headers under
# include/uswap/<layer>/, sources and *_test.cc under src/<layer>/, and a declared list of the
# lower layers it may use. The declared lists are written to layers.cmake so that the `layering`
# test can reject an #include of a layer that is not declared (directly or transitively).

set_property(GLOBAL PROPERTY USWAP_LAYERS "")

include(GNUInstallDirs)
# What USWAP_DCHECK_ON (include/uswap/base/dcheck.h) is in this build. It changes which functions
# the headers declare (lockdep's are defined only when it is on), so an installed consumer must
# compile with the library's value, not with one derived from its own NDEBUG: a Debug program
# against a Release library would otherwise fail to link. Installed targets and uswap.pc carry it.
if(NOT USWAP_SANITIZE STREQUAL "" OR CMAKE_BUILD_TYPE STREQUAL "Debug"
   OR CMAKE_BUILD_TYPE STREQUAL "")
  set(USWAP_INSTALLED_DCHECK_ON 1)
else()
  set(USWAP_INSTALLED_DCHECK_ON 0)
endif()

# uswap_layer(NAME <layer> [SOURCES ...] [DEPS <layer>...] [LIBS <other targets>...])
function(uswap_layer)
  cmake_parse_arguments(L "" "NAME" "SOURCES;DEPS;LIBS" ${ARGN})
  set(target uswap_${L_NAME})
  if(L_SOURCES)
    add_library(${target} STATIC ${L_SOURCES})
    # Initial-exec TLS, reached through the thread pointer alone. The default model in position
    # independent code reads the thread's DTV, which the loader allocates with the program's
    # malloc; under `uswap run` a program that brings its own malloc (rustc links jemalloc in)
    # puts it in paged memory, and the pager, resolving a fault, must never fault. The layers'
    # thread_locals are a few words (lockdep's 4 KiB stack keeps the default model and is
    # placed by include/uswap/sync/lockdep_storage.h), so a dlopen()ed object that links them
    # (the nbdkit plugin) fits in glibc's static TLS surplus.
    target_compile_options(${target} PRIVATE -ftls-model=initial-exec)
    set(scope PUBLIC)
  else()
    add_library(${target} INTERFACE)
    set(scope INTERFACE)
  endif()
  add_library(uswap::${L_NAME} ALIAS ${target})
  target_include_directories(${target} ${scope} $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
                             $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_compile_definitions(${target} ${scope}
                             $<INSTALL_INTERFACE:USWAP_DCHECK_ON=${USWAP_INSTALLED_DCHECK_ON}>)
  target_compile_features(${target} ${scope} cxx_std_20)
  foreach(dep IN LISTS L_DEPS)
    target_link_libraries(${target} ${scope} uswap_${dep})
  endforeach()
  if(L_LIBS)
    target_link_libraries(${target} ${scope} ${L_LIBS})
  endif()
  set_property(GLOBAL APPEND PROPERTY USWAP_LAYERS ${L_NAME})
  set_property(GLOBAL PROPERTY USWAP_LAYER_DEPS_${L_NAME} ${L_DEPS})
  set_property(GLOBAL PROPERTY USWAP_LAYER_LIBS_${L_NAME} ${L_LIBS})
  # Installed as lib/libuswap_<layer>.a, imported by find_package(uswap) as uswap::<layer> (the
  # same name as the alias above). cmake/uswap_install.cmake installs the export set.
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${L_NAME})
  install(TARGETS ${target} EXPORT uswap-targets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
endfunction()

# uswap_test(NAME <name> SOURCES ... LIBS ... [LABELS ...] [TIMEOUT s])
# One GoogleTest binary; each TEST becomes a ctest case (discovered before the test runs, so a
# sanitizer build does not execute tests while building).
function(uswap_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  if(NOT USWAP_BUILD_TESTS)
    return()
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 900)
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main GTest::gmock
                        Threads::Threads)
  # Test-only helpers shared by every layer (thread release, TSan work scaling); never in a
  # public header, so they sit outside include/uswap/.
  target_include_directories(${T_NAME} PRIVATE ${PROJECT_SOURCE_DIR}/tests/support)
  set_target_properties(${T_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  gtest_discover_tests(${T_NAME} DISCOVERY_MODE PRE_TEST
                       PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT})
  foreach(label IN LISTS T_LABELS)
    set_property(GLOBAL APPEND PROPERTY USWAP_TEST_TARGETS_${label} ${T_NAME})
  endforeach()
endfunction()

# A target per test label that builds that label's test executables alone (concurrency_tests:
# what `make tsan` runs), so that a build which runs one label compiles nothing else.
function(uswap_label_targets)
  foreach(label IN LISTS ARGN)
    get_property(targets GLOBAL PROPERTY USWAP_TEST_TARGETS_${label})
    add_custom_target(${label}_tests)
    if(targets)
      add_dependencies(${label}_tests ${targets})
    endif()
  endforeach()
endfunction()

# Writes <build>/layers.cmake: for every layer, the layers it may include (itself and the
# transitive closure of its DEPS).
function(uswap_write_layer_table)
  get_property(layers GLOBAL PROPERTY USWAP_LAYERS)
  set(out "set(USWAP_LAYERS ${layers})\n")
  foreach(layer IN LISTS layers)
    set(closure ${layer})
    set(queue ${layer})
    while(queue)
      list(POP_FRONT queue cur)
      get_property(deps GLOBAL PROPERTY USWAP_LAYER_DEPS_${cur})
      foreach(d IN LISTS deps)
        if(NOT d IN_LIST closure)
          list(APPEND closure ${d})
          list(APPEND queue ${d})
        endif()
      endforeach()
    endwhile()
    string(APPEND out "set(USWAP_ALLOWED_${layer} ${closure})\n")
  endforeach()
  file(WRITE ${CMAKE_BINARY_DIR}/layers.cmake "${out}")
endfunction()

# uswap_link_static_archive(<PREFIX> <archive>): the build tree links the static archive of a
# pkg-config module (PkgConfig::<PREFIX>) in place of its shared library, when the -dev package
# ships one (Debian's are built PIC). The preload shim is loaded into every process `uswap run`
# starts: each shared library it needs is a file the loader opens, maps and looks symbols up in
# at every exec, which a configure script or a build does thousands of times. Installed targets
# still name PkgConfig::<PREFIX>, which a consumer resolves with pkg-config as before.
function(uswap_link_static_archive prefix archive)
  find_library(${prefix}_ARCHIVE NAMES ${archive} HINTS ${${prefix}_LIBRARY_DIRS} NO_CACHE)
  if(${prefix}_ARCHIVE)
    set_property(TARGET PkgConfig::${prefix} PROPERTY INTERFACE_LINK_LIBRARIES
                 ${${prefix}_ARCHIVE})
  endif()
endfunction()
