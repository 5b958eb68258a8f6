# bench_gemm: the CPU backend's GEMM and convolution throughput on the
# models' training shapes, as GFLOP/s and as a fraction of the FMA peak
# measured in the same run.
add_executable(bench_gemm
  ${CMAKE_CURRENT_LIST_DIR}/bench_gemm.cpp
  ${CMAKE_CURRENT_LIST_DIR}/bench_gemm_peak_avx512.cpp
  ${CMAKE_CURRENT_LIST_DIR}/bench_gemm_peak_avx2.cpp)
target_link_libraries(bench_gemm PRIVATE engine_cpu benchmark::benchmark)
# The peak probes are compiled for their ISA only; bench_gemm.cpp picks one
# at run time, so the binary still runs on a CPU without AVX-512.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/bench_gemm_peak_avx512.cpp
  PROPERTIES COMPILE_OPTIONS "-mavx512f;-mfma")
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/bench_gemm_peak_avx2.cpp
  PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma")
