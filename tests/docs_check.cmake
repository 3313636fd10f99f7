# Keeps the docs honest, cheaply (the CTest case docs_check, label unit):
#   - every relative link and image in README.md, docs/*.md and docs/design/*.md resolves to a file
#     or directory of the tree, and a link's #anchor to a heading of the page it names;
#   - every docs/*.md path named in the sources (comments, help text, scripts) exists;
#   - docs/ARCHITECTURE.md stays a map: at most 220 lines;
#   - no header (include/, src/) and no current page (ARCHITECTURE, METHODOLOGY, the design notes)
#     cites an issue number: they describe the code as it is, and git log keeps the history.
# docs/history/ is a record of past runs and is left as it was written.
# Usage: cmake -DSOURCE_DIR=<repo> -P tests/docs_check.cmake
cmake_minimum_required(VERSION 3.20)
if(NOT SOURCE_DIR)
  message(FATAL_ERROR "docs_check: pass -DSOURCE_DIR=<repository root>")
endif()

set(failures "")
macro(fail msg)
  string(APPEND failures "  ${msg}\n")
endmacro()

# GitHub's anchor of a heading: lower case, punctuation dropped, spaces to dashes.
function(heading_slugs file out)
  file(READ "${file}" text)
  string(REGEX REPLACE "```[^`]*```" "" text "${text}")
  # CMake lists split at ';' except inside [...]: neither may reach a list (both are punctuation,
  # which anchors drop anyway).
  string(REGEX REPLACE "[][;]" "" text "${text}")
  string(REGEX MATCHALL "(^|\n)#+ [^\n]*" heads "${text}")
  set(slugs "")
  foreach(h IN LISTS heads)
    string(REGEX REPLACE "^\n?#+ " "" h "${h}")
    string(TOLOWER "${h}" h)
    string(REGEX REPLACE "[^a-z0-9 _-]" "" h "${h}")
    string(REPLACE " " "-" h "${h}")
    list(APPEND slugs "${h}")
  endforeach()
  set(${out} "${slugs}" PARENT_SCOPE)
endfunction()

# 1. Links.
file(GLOB pages ${SOURCE_DIR}/README.md ${SOURCE_DIR}/docs/*.md ${SOURCE_DIR}/docs/design/*.md)
list(LENGTH pages nr_pages)
if(nr_pages LESS 5)
  fail("found only ${nr_pages} pages under ${SOURCE_DIR}: wrong SOURCE_DIR?")
endif()
set(nr_links 0)
foreach(page IN LISTS pages)
  file(RELATIVE_PATH rel "${SOURCE_DIR}" "${page}")
  get_filename_component(dir "${page}" DIRECTORY)
  file(READ "${page}" text)
  # Code blocks show commands, not links.
  string(REGEX REPLACE "```[^`]*```" "" text "${text}")
  # A link is "](target)". CMake lists split at ';' except inside [...], so the brackets and
  # semicolons go before the matches become a list.
  string(REPLACE "](" "@@LINK@@(" text "${text}")
  string(REGEX REPLACE "[][;]" "" text "${text}")
  string(REGEX MATCHALL "@@LINK@@\\([^) ]*\\)" links "${text}")
  foreach(link IN LISTS links)
    string(REGEX REPLACE "^@@LINK@@\\(([^)]*)\\)$" "\\1" target "${link}")
    if(target MATCHES "^(https?|mailto|ftp):")
      continue()
    endif()
    math(EXPR nr_links "${nr_links} + 1")
    set(anchor "")
    if(target MATCHES "#")
      string(REGEX REPLACE "^[^#]*#" "" anchor "${target}")
      string(REGEX REPLACE "#.*$" "" target "${target}")
    endif()
    if(target STREQUAL "")
      set(path "${page}")
    else()
      set(path "${dir}/${target}")
    endif()
    if(NOT EXISTS "${path}")
      fail("${rel}: broken link (${target})")
      continue()
    endif()
    if(NOT anchor STREQUAL "" AND path MATCHES "\\.md$")
      heading_slugs("${path}" slugs)
      if(NOT anchor IN_LIST slugs)
        fail("${rel}: no heading for #${anchor} in ${target}")
      endif()
    endif()
  endforeach()
endforeach()
if(nr_links LESS 20)
  fail("found only ${nr_links} relative links: the link pattern no longer matches the pages?")
endif()

# 2. Doc paths named in the sources.
file(GLOB_RECURSE sources
     ${SOURCE_DIR}/include/*.h ${SOURCE_DIR}/src/*.h ${SOURCE_DIR}/src/*.cc ${SOURCE_DIR}/src/*.c
     ${SOURCE_DIR}/tools/*.h ${SOURCE_DIR}/tools/*.cc ${SOURCE_DIR}/bench/*.cc
     ${SOURCE_DIR}/bench/*.sh ${SOURCE_DIR}/tests/*.cc ${SOURCE_DIR}/tests/*.sh
     ${SOURCE_DIR}/tests/*.cmake ${SOURCE_DIR}/cmake/*.cmake ${SOURCE_DIR}/*/CMakeLists.txt)
file(GLOB scripts ${SOURCE_DIR}/scripts/*)
list(APPEND sources ${scripts} ${SOURCE_DIR}/CMakeLists.txt ${SOURCE_DIR}/Makefile)
foreach(src IN LISTS sources)
  if(IS_DIRECTORY "${src}")
    continue()
  endif()
  file(STRINGS "${src}" hits REGEX "docs/[A-Za-z0-9_./-]*\\.md")
  foreach(line IN LISTS hits)
    string(REGEX MATCHALL "docs/[A-Za-z0-9_./-]*\\.md" names "${line}")
    foreach(name IN LISTS names)
      if(NOT EXISTS "${SOURCE_DIR}/${name}")
        file(RELATIVE_PATH rel "${SOURCE_DIR}" "${src}")
        fail("${rel}: names ${name}, which does not exist")
      endif()
    endforeach()
  endforeach()
endforeach()

# 3. The map stays a map.
file(READ "${SOURCE_DIR}/docs/ARCHITECTURE.md" arch)
string(REGEX MATCHALL "\n" newlines "${arch}")
list(LENGTH newlines arch_lines)
if(arch_lines GREATER 220)
  fail("docs/ARCHITECTURE.md has ${arch_lines} lines (at most 220: details go in docs/design/)")
endif()

# 4. No issue numbers where the code is described.
file(GLOB_RECURSE headers ${SOURCE_DIR}/include/*.h ${SOURCE_DIR}/src/*.h)
file(GLOB current ${SOURCE_DIR}/docs/ARCHITECTURE.md ${SOURCE_DIR}/docs/METHODOLOGY.md
     ${SOURCE_DIR}/docs/design/*.md)
foreach(f IN LISTS headers current)
  file(STRINGS "${f}" hits REGEX "[Ii]ssue #?[0-9]")
  if(hits)
    file(RELATIVE_PATH rel "${SOURCE_DIR}" "${f}")
    list(GET hits 0 first)
    string(STRIP "${first}" first)
    fail("${rel}: cites an issue number (${first})")
  endif()
endforeach()

if(NOT failures STREQUAL "")
  message(FATAL_ERROR "docs_check failed:\n${failures}")
endif()
message(STATUS "docs_check: ${nr_pages} pages, ${nr_links} relative links, all resolve")
