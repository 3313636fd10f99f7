# Where `cmake --install` puts each piece, decided before the layers and tools are configured
# (they install themselves and bake the relative paths in). GNUInstallDirs gives the usual
# directories; with prefix /usr on Debian, CMAKE_INSTALL_LIBDIR is lib/<multiarch>, which makes
# <libdir>/nbdkit/plugins nbdkit's own plugin directory, so `nbdkit uswap` finds the plugin by
# name. docs/design/tools.md describes the installed layout.
include(GNUInstallDirs)

# The preload shim of `uswap run`: private to uswap, so in a directory of its own under libdir.
set(USWAP_INSTALL_PRELOADDIR ${CMAKE_INSTALL_LIBDIR}/uswap)

# The nbdkit plugin. Empty: <libdir>/nbdkit/plugins under the prefix. A relative value is taken
# under the prefix, an absolute one as it is.
set(USWAP_NBDKIT_PLUGINDIR "" CACHE STRING
    "Where nbdkit-uswap-plugin.so is installed (default: <libdir>/nbdkit/plugins)")
if(USWAP_NBDKIT_PLUGINDIR STREQUAL "")
  set(USWAP_INSTALL_PLUGINDIR ${CMAKE_INSTALL_LIBDIR}/nbdkit/plugins)
else()
  set(USWAP_INSTALL_PLUGINDIR ${USWAP_NBDKIT_PLUGINDIR})
endif()

# The installed `uswap` finds the shim and the plugin from its own location (/proc/self/exe), so
# an installed tree can be moved as a whole: these are the paths from bindir, relative unless a
# directory was given as an absolute path.
function(uswap_path_from_bindir out dir)
  if(IS_ABSOLUTE "${dir}")
    set(${out} "${dir}" PARENT_SCOPE)
  else()
    file(RELATIVE_PATH rel ${CMAKE_INSTALL_FULL_BINDIR} ${CMAKE_INSTALL_PREFIX}/${dir})
    set(${out} "${rel}" PARENT_SCOPE)
  endif()
endfunction()
uswap_path_from_bindir(USWAP_PRELOADDIR_FROM_BINDIR ${USWAP_INSTALL_PRELOADDIR})
uswap_path_from_bindir(USWAP_PLUGINDIR_FROM_BINDIR ${USWAP_INSTALL_PLUGINDIR})

# Whether nbdkit will find the plugin by name: it looks only in its own plugindir.
find_program(USWAP_NBDKIT_PROGRAM nbdkit)
if(USWAP_NBDKIT_PROGRAM)
  execute_process(COMMAND ${USWAP_NBDKIT_PROGRAM} --dump-config OUTPUT_VARIABLE nbdkit_config
                  ERROR_QUIET RESULT_VARIABLE nbdkit_rc)
  if(nbdkit_rc EQUAL 0 AND nbdkit_config MATCHES "(^|\n)plugindir=([^\n]*)")
    set(nbdkit_plugindir ${CMAKE_MATCH_2})
    if(IS_ABSOLUTE "${USWAP_INSTALL_PLUGINDIR}")
      set(full ${USWAP_INSTALL_PLUGINDIR})
    else()
      set(full ${CMAKE_INSTALL_PREFIX}/${USWAP_INSTALL_PLUGINDIR})
    endif()
    if(full STREQUAL nbdkit_plugindir)
      message(STATUS "nbdkit plugin: ${full} (nbdkit's plugindir: `nbdkit uswap` finds it)")
    else()
      message(STATUS "nbdkit plugin: ${full}, not nbdkit's plugindir (${nbdkit_plugindir}): "
                     "run it as `nbdkit ${full}/nbdkit-uswap-plugin.so`, or install with "
                     "prefix /usr")
    endif()
  endif()
endif()
