# fma_peak: the FMA peak probe every benchmark compares against. The probes
# are compiled for their ISA only and picked at run time, so the binaries
# still run on a CPU without AVX-512.
add_library(fma_peak STATIC
  ${CMAKE_CURRENT_LIST_DIR}/fma_peak.cpp
  ${CMAKE_CURRENT_LIST_DIR}/fma_peak_avx512.cpp
  ${CMAKE_CURRENT_LIST_DIR}/fma_peak_avx2.cpp)
target_include_directories(fma_peak PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(fma_peak PUBLIC OpenMP::OpenMP_CXX PRIVATE engine_core)
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/fma_peak_avx512.cpp
  PROPERTIES COMPILE_OPTIONS "-mavx512f;-mfma")
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/fma_peak_avx2.cpp
  PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma")
