# gpu.suite: tests/gpu/run.sh against this build. On a machine without an
# NVIDIA GPU the script exits 77 and CTest reports the test as skipped.
# Included from bench/CMakeLists.txt (and from tests/gpu/CMakeLists.txt if
# tests/ adds the folder); the guard keeps it to one definition.
get_property(gf_gpu_suite_done GLOBAL PROPERTY GF_GPU_SUITE_DEFINED)
if(NOT gf_gpu_suite_done)
  set_property(GLOBAL PROPERTY GF_GPU_SUITE_DEFINED 1)
  add_test(NAME gpu.suite
    COMMAND bash ${CMAKE_SOURCE_DIR}/tests/gpu/run.sh ${CMAKE_BINARY_DIR}
            ${CMAKE_BINARY_DIR}/gpu-out)
  set_tests_properties(gpu.suite PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 3600)
endif()
