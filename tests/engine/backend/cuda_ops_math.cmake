# The CUDA module's elementwise, row and pooling math
# (backend/cuda/ops_math.cuh) compiled for the host and held to the CPU
# backend: runs without CUDA or a GPU. -ffp-contract=off: the CPU's
# reduced-precision rows (rows.cpp) round after each multiply and add, and
# the device code spells every operation out as a rounded intrinsic; g++
# must not fuse the host build of the same expressions either.
pl_add_test(test_cuda_ops_math
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cuda_ops_math.cpp
  LIBS engine_cpu
  LABELS engine)
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/test_cuda_ops_math.cpp
  PROPERTIES COMPILE_OPTIONS "-ffp-contract=off")
