# cmake -DFUZZER=<binary> -DOPTIONS=<list> -DRUNS=<n> -DSEEDS=<dir> -DSCRATCH=<dir> -P smoke.cmake
# libFuzzer adds the inputs it finds to its first corpus directory: give it a
# fresh scratch one, so the checked-in seeds stay as they are and every smoke
# starts from the same state. A crash leaves crash-<sha1> in the build tree.
file(REMOVE_RECURSE ${SCRATCH})
file(MAKE_DIRECTORY ${SCRATCH})
execute_process(COMMAND ${FUZZER} ${OPTIONS} -runs=${RUNS} ${SCRATCH} ${SEEDS} RESULT_VARIABLE code)
if(NOT code EQUAL 0)
  message(FATAL_ERROR "${FUZZER} failed (exit ${code}); reproduce with: ${FUZZER} <crash file>")
endif()
