# bench_cuda_gemm: cuBLASLt GEMM TFLOP/s per shape and format against the
# card's datasheet peak. Built everywhere; runs where there is a device.
add_executable(bench_cuda_gemm ${CMAKE_CURRENT_LIST_DIR}/bench_cuda_gemm.cpp)
target_link_libraries(bench_cuda_gemm PRIVATE engine_backends benchmark::benchmark)
