# bench.quick: runs `gpufrac-bench --quick --sim` and checks that it completed
# and printed every key. Timings are never asserted.
#   cmake -DBENCH=<gpufrac-bench> -DOUT=<file> -P check_keys.cmake
set(keys
  bench_version platform device_name device_total_bytes driver_version fraction_limit_bytes
  cpus quick shim fraction_peak_bytes
  pairs_n pairs_size_bytes pairs_runs pairs_ns_noshim pairs_ns_shim pairs_added_ns pairs_ratio
  pairs_target
  contended_procs contended_pairs_per_proc contended_pairs_per_s_noshim
  contended_pairs_per_s_shim contended_cpu_ns_per_pair_noshim contended_cpu_ns_per_pair_shim
  contended_cpu_added_ns contended_ratio contended_target
  big_size_bytes big_allocs_per_proc
  big_uncontended_median_us_noshim big_uncontended_p99_us_noshim
  big_contended_median_us_noshim big_contended_p99_us_noshim big_contention_factor_noshim
  big_uncontended_median_us_shim big_uncontended_p99_us_shim
  big_contended_median_us_shim big_contended_p99_us_shim big_contention_factor_shim
  big_uncontended_added_us big_contended_added_us big_contended_ratio big_target
  launch_n launch_status launch_ns_noshim launch_ns_shim launch_ratio launch_target
  startup_median_ms_noshim startup_p90_ms_noshim startup_median_ms_shim startup_p90_ms_shim
  startup_runs startup_added_ms startup_target)

get_filename_component(json "${OUT}" NAME_WE)
get_filename_component(dir "${OUT}" DIRECTORY)
set(json "${dir}/${json}.json")
execute_process(COMMAND "${BENCH}" --quick --sim --json "${json}"
  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc TIMEOUT 540)
file(WRITE "${OUT}" "${out}")
message("${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gpufrac-bench --quick --sim failed (${rc}):\n${err}")
endif()
set(missing "")
foreach(k IN LISTS keys)
  string(REGEX MATCH "(^|\n)${k}=[^\n]+" hit "${out}")
  if(NOT hit)
    list(APPEND missing ${k})
  endif()
endforeach()
if(missing)
  message(FATAL_ERROR "gpufrac-bench did not print: ${missing}")
endif()
# the simulated run must launch (gpusim takes a fake function)
string(REGEX MATCH "(^|\n)launch_status=ok" hit "${out}")
if(NOT hit)
  message(FATAL_ERROR "cuLaunchKernel was not measured on gpusim")
endif()
file(READ "${json}" j)
string(JSON n LENGTH "${j}")
list(LENGTH keys want)
if(n LESS want)
  message(FATAL_ERROR "${json}: ${n} keys, expected at least ${want}")
endif()
