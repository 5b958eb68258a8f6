# The CUDA step entries' math (backend/cuda/step_math.cuh) compiled for the
# host and held to the CPU backend (the scale update to LossScaler): runs
# without CUDA or a GPU.
pl_add_test(test_cuda_step_math
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cuda_step_math.cpp
  LIBS engine_cpu engine_amp
  LABELS engine)
