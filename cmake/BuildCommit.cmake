# Run at build time (cmake -P): writes OUT, a C++ file defining
# gputrain::app::build_commit(), from `git` in SOURCE_DIR: the commit's hash,
# with "-dirty" where tracked files differ from it, or "unknown" outside a git
# checkout (an unpacked source archive). OUT is rewritten only when the text
# changes, so an unchanged commit rebuilds nothing.
execute_process(COMMAND git -C "${SOURCE_DIR}" rev-parse --short=12 HEAD
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE failed ERROR_QUIET)
if(failed OR commit STREQUAL "")
  set(commit "unknown")
else()
  execute_process(COMMAND git -C "${SOURCE_DIR}" diff --quiet HEAD -- RESULT_VARIABLE dirty ERROR_QUIET)
  if(dirty)
    string(APPEND commit "-dirty")
  endif()
endif()
set(text "// Written by cmake/BuildCommit.cmake at build time.\n#include \"build_commit.h\"\n\nconst char* gputrain::app::build_commit() { return \"${commit}\"; }\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
