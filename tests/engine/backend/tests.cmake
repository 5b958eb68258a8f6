# tests/engine/backend: the CUDA module loader and, with a device, the CUDA
# casts against the scalar reference.
pl_add_test(test_cuda_module
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cuda_module.cpp
  LIBS engine_backends
  LABELS engine
  TIMEOUT 300)
if(TARGET pl_cuda)
  # The test loads the module from the build tree: build it first, and tell
  # the test it must be found.
  add_dependencies(test_cuda_module pl_cuda)
  target_compile_definitions(test_cuda_module PRIVATE PL_TEST_CUDA_MODULE_BUILT=1)
endif()
# Fake modules (no CUDA needed) the loader must refuse or accept; the test
# probes each by path.
foreach(_pl_fake abi1:1 newer:2 short:3 no_entries:4 no_device:5)
  string(REPLACE ":" ";" _pl_fake "${_pl_fake}")
  list(GET _pl_fake 0 _pl_fake_name)
  list(GET _pl_fake 1 _pl_fake_kind)
  set(_pl_fake_target pl_test_fake_cuda_${_pl_fake_name})
  add_library(${_pl_fake_target} MODULE ${CMAKE_CURRENT_LIST_DIR}/fake_cuda_module.cpp)
  target_include_directories(${_pl_fake_target} PRIVATE ${PROJECT_SOURCE_DIR}/engine)
  target_compile_definitions(${_pl_fake_target} PRIVATE PL_FAKE_KIND=${_pl_fake_kind})
  set_target_properties(${_pl_fake_target} PROPERTIES CXX_VISIBILITY_PRESET hidden)
  string(TOUPPER ${_pl_fake_name} _pl_fake_upper)
  target_compile_definitions(test_cuda_module PRIVATE
    "PL_TEST_FAKE_MODULE_${_pl_fake_upper}=\"$<TARGET_FILE:${_pl_fake_target}>\"")
  add_dependencies(test_cuda_module ${_pl_fake_target})
endforeach()
include(${CMAKE_CURRENT_LIST_DIR}/cuda_step_math.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/cuda_ops_math.cmake)
