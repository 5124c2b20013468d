# Writes the build's identity (version, git commit, options) as a header for `deskside env`
# (engine/stack_fingerprint.cpp). Run as a script at every build (CMakeLists.txt's
# deskside_build_info target), so the commit is the one compiled rather than the one configured;
# configure_file rewrites OUTPUT only when its text changes, so an unchanged tree recompiles nothing.
#
# Inputs (-D): SOURCE_DIR, OUTPUT, GIT (may be empty), VERSION, BUILD_TYPE, VULKAN, CUDA, NATIVE,
# SANITIZE, CUDA_ARCHS, CUDA_COMPILER.

set(DESKSIDE_GIT_COMMIT "unknown")
set(DESKSIDE_GIT_DIRTY "false")
# Only the checkout's own repository counts: a source tarball unpacked inside some other repository
# must say "unknown", not that repository's commit.
if(GIT AND EXISTS "${SOURCE_DIR}/.git")
  execute_process(COMMAND "${GIT}" -C "${SOURCE_DIR}" rev-parse HEAD
    RESULT_VARIABLE _rc OUTPUT_VARIABLE _commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(_rc EQUAL 0 AND _commit MATCHES "^[0-9a-f]+$")
    set(DESKSIDE_GIT_COMMIT "${_commit}")
    # Tracked files changed since the commit: the binary is not exactly that commit.
    execute_process(COMMAND "${GIT}" -C "${SOURCE_DIR}" diff --quiet HEAD --
      RESULT_VARIABLE _dirty OUTPUT_QUIET ERROR_QUIET)
    if(_dirty EQUAL 1)
      set(DESKSIDE_GIT_DIRTY "true")
    endif()
  endif()
endif()

foreach(_option VULKAN CUDA NATIVE)
  if(${_option})
    set(${_option} "ON")
  else()
    set(${_option} "OFF")
  endif()
endforeach()
if(NOT SANITIZE)
  set(SANITIZE "OFF")
endif()
if(NOT CUDA)
  set(CUDA_ARCHS "")
  set(CUDA_COMPILER "")
endif()

configure_file("${CMAKE_CURRENT_LIST_DIR}/build_info.h.in" "${OUTPUT}" @ONLY)
