# bench_solve: LU-IR in bf16, fp16 and fp32 against OpenBLAS's dgesv and
# dsgesv on the same matrix in the same run (OpenBLAS links only here and
# in the solver's peer test).
find_library(PL_OPENBLAS NAMES openblas)
if(PL_OPENBLAS)
  add_executable(bench_solve ${CMAKE_CURRENT_LIST_DIR}/bench_solve.cpp)
  target_include_directories(bench_solve PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  target_link_libraries(bench_solve PRIVATE engine_solve ${PL_OPENBLAS} benchmark::benchmark)
endif()
