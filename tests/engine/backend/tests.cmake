# tests/engine/backend: the CUDA module loader and, with a device, the CUDA
# casts against the scalar reference.
pl_add_test(test_cuda_module
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cuda_module.cpp
  LIBS engine_cpu
  LABELS engine
  TIMEOUT 300)
if(TARGET pl_cuda)
  # The test loads the module from the build tree: build it first, and tell
  # the test it must be found.
  add_dependencies(test_cuda_module pl_cuda)
  target_compile_definitions(test_cuda_module PRIVATE PL_TEST_CUDA_MODULE_BUILT=1)
endif()
