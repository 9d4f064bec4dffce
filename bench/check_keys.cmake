# SPDX-License-Identifier: Apache-2.0
# The quick bench tests: runs a bench with its quick arguments and checks that
# it completed and printed every key of a keys file. Timings are never
# asserted. Registered by gf_bench_quick_test (bench/CMakeLists.txt):
#   cmake -DBENCH=<bench> -DARGS="--quick --sim" -DKEYS=<file.keys> -DTIMEOUT=<s>
#         [-DOUT=<file>] [-DJSON=ON] [-DREQUIRE=<regex> -DREQUIRE_MSG=<text>]
#         -P check_keys.cmake
# OUT: the output is also written there. JSON: the bench also writes
# --json <OUT without extension>.json, which must hold at least as many keys.
# REQUIRE: a line of the output must match ^REQUIRE, else REQUIRE_MSG.
get_filename_component(bench_name "${BENCH}" NAME)
file(READ "${KEYS}" keys_text)
string(REGEX REPLACE "#[^\n]*" "" keys_text "${keys_text}")
separate_arguments(keys UNIX_COMMAND "${keys_text}")
separate_arguments(args UNIX_COMMAND "${ARGS}")

if(JSON)
  get_filename_component(json "${OUT}" NAME_WE)
  get_filename_component(dir "${OUT}" DIRECTORY)
  set(json "${dir}/${json}.json")
  list(APPEND args --json "${json}")
endif()
execute_process(COMMAND "${BENCH}" ${args}
  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc TIMEOUT ${TIMEOUT})
if(OUT)
  file(WRITE "${OUT}" "${out}")
endif()
message("${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${bench_name} ${ARGS} failed (${rc}):\n${err}")
endif()
set(missing "")
foreach(k IN LISTS keys)
  string(REGEX MATCH "(^|\n)${k}=[^\n]+" hit "${out}")
  if(NOT hit)
    list(APPEND missing ${k})
  endif()
endforeach()
if(missing)
  message(FATAL_ERROR "${bench_name} did not print: ${missing}")
endif()
if(REQUIRE)
  string(REGEX MATCH "(^|\n)${REQUIRE}" hit "${out}")
  if(NOT hit)
    message(FATAL_ERROR "${REQUIRE_MSG}")
  endif()
endif()
if(JSON)
  file(READ "${json}" j)
  string(JSON n LENGTH "${j}")
  list(LENGTH keys want)
  if(n LESS want)
    message(FATAL_ERROR "${json}: ${n} keys, expected at least ${want}")
  endif()
endif()
