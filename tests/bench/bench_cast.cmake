# bench_cast: bulk cast throughput (GB/s) per format, direction and path,
# against memcpy of the FP32 array in the same run.
add_executable(bench_cast ${CMAKE_CURRENT_LIST_DIR}/bench_cast.cpp)
target_link_libraries(bench_cast PRIVATE engine_core benchmark::benchmark)
