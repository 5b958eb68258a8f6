# tests/engine/conformance: every Backend op on every backend against the
# scalar reference. -ffp-contract=off: the reduced-precision references
# round after each multiply and add, exactly as the backends must.
pl_add_test(test_backend_conformance
  SOURCES engine/conformance/test_backend_conformance.cpp engine/conformance/host_cuda_table.cpp
  LIBS engine_train engine_backends
  LABELS engine)
set_source_files_properties(engine/conformance/test_backend_conformance.cpp
  PROPERTIES COMPILE_OPTIONS "-ffp-contract=off")
# The suite is the longest test (minutes under AddressSanitizer): it runs as
# two gtest shards so `ctest -j2` keeps both cores busy.
set_tests_properties(test_backend_conformance PROPERTIES
  ENVIRONMENT "GTEST_TOTAL_SHARDS=2;GTEST_SHARD_INDEX=0")
add_test(NAME test_backend_conformance_shard2 COMMAND test_backend_conformance --gtest_brief=1)
set_tests_properties(test_backend_conformance test_backend_conformance_shard2 PROPERTIES COST 1000)
set_tests_properties(test_backend_conformance_shard2 PROPERTIES LABELS engine
  ENVIRONMENT "GTEST_TOTAL_SHARDS=2;GTEST_SHARD_INDEX=1" WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
# The suite again on the AVX2 code paths (the engine's own kernels capped by
# PL_MAX_CPU_ISA, oneDNN by DNNL_MAX_CPU_ISA): on an AVX-512 machine nothing
# else runs them end to end. Label isa: the release build runs these; the
# sanitizer builds check the memory and threading of the same code once.
# Only the CPU backend and its composed form: the host CUDA table is
# ISA-independent test code, "bf16 decoded" is what the cap already makes
# the CPU backend do, and 16 threads split the same kernels differently
# (all three run in the suite above).
set(_pl_isa_filter "GTEST_FILTER=*/cpu:*/cpu_composed:CpuBackend.*:CpuGeluLanes.*:GeluCastKernel.*")
add_test(NAME test_backend_conformance_avx2 COMMAND test_backend_conformance --gtest_brief=1)
set_tests_properties(test_backend_conformance_avx2 PROPERTIES LABELS "engine;isa"
  ENVIRONMENT "PL_MAX_CPU_ISA=avx2;DNNL_MAX_CPU_ISA=AVX2;${_pl_isa_filter}" WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
# And on AVX-512 without its BF16 instructions (Skylake-SP to Ice Lake: FP32
# -> BF16 by integer rounding, BF16 and FP8 GEMMs decoded to f32).
add_test(NAME test_backend_conformance_avx512 COMMAND test_backend_conformance --gtest_brief=1)
set_tests_properties(test_backend_conformance_avx512 PROPERTIES LABELS "engine;isa"
  ENVIRONMENT "PL_MAX_CPU_ISA=avx512;DNNL_MAX_CPU_ISA=AVX512_CORE;${_pl_isa_filter}" WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
# Memory the device reports (the CUDA Backend over the host table): the
# allocator's live bytes in every step's metrics and steps.csv.
pl_add_test(test_device_memory
  SOURCES engine/conformance/test_device_memory.cpp engine/conformance/host_cuda_table.cpp
  LIBS engine_train engine_backends engine_report
  LABELS engine)

# The step on the device, captured once (ABI 6): captured and uncaptured
# steps through the CUDA Backend's code over the host table, bit for bit,
# and against the CPU backend deciding on the host. Its CudaStepGraphDevice
# case runs the real module on a GPU (skipped without one):
#   build/release/tests/test_cuda_step_graph --gtest_filter='CudaStepGraphDevice.*'
pl_add_test(test_cuda_step_graph
  SOURCES engine/conformance/test_cuda_step_graph.cpp engine/conformance/host_cuda_table.cpp
  LIBS engine_train engine_backends
  LABELS engine)
if(TARGET pl_cuda)
  add_dependencies(test_cuda_step_graph pl_cuda)
endif()
