# Writes version.h at every build (not only when cmake configures): `uswap --version` names the
# commit the binary was built from, "-dirty" when the tree had changes. configure_file rewrites
# the header only when its text changes, so an unchanged commit rebuilds nothing.
# Inputs (-D): SOURCE_DIR, VERSION, IN, OUT.
execute_process(COMMAND git -C ${SOURCE_DIR} describe --always --dirty --abbrev=7
                OUTPUT_VARIABLE USWAP_GIT_HASH OUTPUT_STRIP_TRAILING_WHITESPACE
                ERROR_QUIET RESULT_VARIABLE git_rc)
if(git_rc EQUAL 0 AND USWAP_GIT_HASH)
  set(USWAP_GIT_SUFFIX " (git ${USWAP_GIT_HASH})")
else()
  set(USWAP_GIT_SUFFIX "")
endif()
set(PROJECT_VERSION ${VERSION})
configure_file(${IN} ${OUT} @ONLY)
