# bench_gemm: the CPU backend's GEMM and convolution throughput on the
# models' training shapes, as GFLOP/s and as a fraction of the FMA peak
# measured in the same run.
add_executable(bench_gemm ${CMAKE_CURRENT_LIST_DIR}/bench_gemm.cpp)
target_link_libraries(bench_gemm PRIVATE engine_cpu fma_peak benchmark::benchmark)
