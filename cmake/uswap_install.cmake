# What `cmake --install` adds beyond the targets that install themselves (the layers' static
# libraries in cmake/uswap_layer.cmake, uswap in tools/, the preload shim in src/uffd/, the nbdkit
# plugin in src/nbd/): the public headers, the CMake package (find_package(uswap), one imported
# target uswap::<layer> per layer), uswap.pc for pkg-config, the man pages, and the Debian package
# (`make deb`: CPack). Included last, once every layer is declared.
include(CMakePackageConfigHelpers)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/uswap DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")

# The third-party libraries the layers link (their LIBS): Threads, and pkg-config modules whose
# imported targets (PkgConfig::<PREFIX>) consumers must be able to name too. The static
# libraries carry no copy of them, so every consumer links them.
get_property(uswap_layers GLOBAL PROPERTY USWAP_LAYERS)
set(uswap_pkg_prefixes "")
foreach(layer IN LISTS uswap_layers)
  get_property(libs GLOBAL PROPERTY USWAP_LAYER_LIBS_${layer})
  foreach(lib IN LISTS libs)
    if(lib MATCHES "^PkgConfig::(.+)$" AND NOT CMAKE_MATCH_1 IN_LIST uswap_pkg_prefixes)
      list(APPEND uswap_pkg_prefixes ${CMAKE_MATCH_1})
    elseif(NOT lib MATCHES "^PkgConfig::" AND NOT lib STREQUAL "Threads::Threads")
      message(FATAL_ERROR "layer ${layer} links ${lib}: say in cmake/uswap_install.cmake how an "
                          "installed consumer finds it")
    endif()
  endforeach()
endforeach()
set(USWAP_CONFIG_PKG_MODULES "")
set(USWAP_PC_REQUIRES "")
foreach(prefix IN LISTS uswap_pkg_prefixes)
  set(module ${${prefix}_MODULE_NAME})
  string(APPEND USWAP_CONFIG_PKG_MODULES "  ${prefix} ${module}\n")
  list(APPEND USWAP_PC_REQUIRES ${module})
endforeach()
list(JOIN USWAP_PC_REQUIRES " " USWAP_PC_REQUIRES)

# Highest layer first, so that a static link resolves every layer's symbols in one pass.
set(USWAP_PC_LIBS "")
set(reversed ${uswap_layers})
list(REVERSE reversed)
foreach(layer IN LISTS reversed)
  string(APPEND USWAP_PC_LIBS " -luswap_${layer}")
endforeach()
string(REPLACE ";" " " USWAP_CONFIG_LAYERS "${uswap_layers}")

set(USWAP_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/uswap)
install(EXPORT uswap-targets NAMESPACE uswap:: DESTINATION ${USWAP_CMAKE_DIR}
        FILE uswap-targets.cmake)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/uswap-config.cmake.in
                              ${CMAKE_BINARY_DIR}/install/uswap-config.cmake
                              INSTALL_DESTINATION ${USWAP_CMAKE_DIR})
# 0.x: a minor version may change the API.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/install/uswap-config-version.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/install/uswap-config.cmake
              ${CMAKE_BINARY_DIR}/install/uswap-config-version.cmake
        DESTINATION ${USWAP_CMAKE_DIR})

# uswap.pc names the prefix it is installed under, which `cmake --install --prefix` and cpack
# choose at install time: configured now with that one line left as @CMAKE_INSTALL_PREFIX@, and
# again when installing.
set(USWAP_PC_PREFIX "@CMAKE_INSTALL_PREFIX@")
configure_file(${PROJECT_SOURCE_DIR}/cmake/uswap.pc.in ${CMAKE_BINARY_DIR}/install/uswap.pc.in
               @ONLY)
install(CODE "configure_file(\"${CMAKE_BINARY_DIR}/install/uswap.pc.in\"
                             \"${CMAKE_BINARY_DIR}/install/uswap.pc\" @ONLY)")
install(FILES ${CMAKE_BINARY_DIR}/install/uswap.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# Man pages: POD sources in docs/man/, rendered by pod2man as nbdkit renders its own.
find_program(USWAP_POD2MAN pod2man REQUIRED)
set(uswap_man_pages "")
foreach(page uswap nbdkit-uswap-plugin)
  set(pod ${PROJECT_SOURCE_DIR}/docs/man/${page}.pod)
  set(man ${CMAKE_BINARY_DIR}/man/${page}.1)
  add_custom_command(OUTPUT ${man}
                     COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/man
                     COMMAND ${USWAP_POD2MAN} --errors=stderr --section=1 --center=uswap
                             --release=uswap-${PROJECT_VERSION} --name=${page} ${pod} ${man}
                     DEPENDS ${pod} VERBATIM)
  list(APPEND uswap_man_pages ${man})
endforeach()
add_custom_target(man ALL DEPENDS ${uswap_man_pages})
install(FILES ${uswap_man_pages} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)

if(USWAP_BUILD_TESTS)
  add_subdirectory(${PROJECT_SOURCE_DIR}/tests/install ${CMAKE_BINARY_DIR}/tests/install)
endif()

# The Debian package: `make deb` configures with prefix /usr (so that libdir is
# lib/<multiarch> and the plugin lands in nbdkit's plugindir) and runs cpack in the build tree.
# dpkg-shlibdeps computes the runtime dependencies of uswap, the shim and the plugin.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME uswap)
set(CPACK_PACKAGE_VENDOR uswap)
set(CPACK_PACKAGE_CONTACT "uswap maintainers <uswap@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Linux's swap stack in userspace: zram, swap slots, a userfaultfd pager")
string(CONCAT CPACK_PACKAGE_DESCRIPTION
       "The uswap command (uswap run pages any program's memory through a compressed store), "
       "the nbdkit plugin (nbdkit uswap), the static libraries with their headers, CMake package "
       "and pkg-config file, and the man pages.")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# nbdkit runs the plugin and `uswap serve`; the -dev packages are what a program linking the
# static libraries needs (uswap.pc Requires, find_package(uswap)).
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "nbdkit")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS
    "liblz4-dev, libzstd-dev, liblzo2-dev, libxxhash-dev, pkg-config, libnbd-bin")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_OUTPUT_FILE_PREFIX ${CMAKE_BINARY_DIR})
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
include(CPack)
