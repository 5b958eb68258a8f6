# bench_train: training samples/s per model and recipe, ratios to fp32, and
# the mlp step's fraction of the FMA peak, all in one run.
add_executable(bench_train ${CMAKE_CURRENT_LIST_DIR}/bench_train.cpp)
target_link_libraries(bench_train PRIVATE engine_train engine_backends fma_peak benchmark::benchmark)
