# bench_ops: one model and recipe's training step, time per Backend op.
add_executable(bench_ops ${CMAKE_CURRENT_LIST_DIR}/bench_ops.cpp)
target_link_libraries(bench_ops PRIVATE engine_train engine_backends engine_cpu)
