# The engine's folders form a one-way stack (engine/CMakeLists.txt): an
# include of a higher folder does not compile. This probe includes nn/ from
# a target that links only numeric; the test passes when its build fails there,
# and the control beside it, the same probe with nn linked, must build.
add_executable(pl_layering_upward EXCLUDE_FROM_ALL engine/layering/upward_include.cpp)
target_link_libraries(pl_layering_upward PRIVATE engine_numeric)
add_executable(pl_layering_control EXCLUDE_FROM_ALL engine/layering/upward_include.cpp)
target_link_libraries(pl_layering_control PRIVATE engine_nn)
add_test(NAME test_layering_upward_include_fails
         COMMAND ${CMAKE_COMMAND} --build ${CMAKE_BINARY_DIR} --target pl_layering_upward)
# Passes on the compiler's own complaint about that include, not on any failure.
set_tests_properties(test_layering_upward_include_fails PROPERTIES
                     PASS_REGULAR_EXPRESSION "nn/layer\\.h: No such file" LABELS engine TIMEOUT 300)
add_test(NAME test_layering_control_builds
         COMMAND ${CMAKE_COMMAND} --build ${CMAKE_BINARY_DIR} --target pl_layering_control)
set_tests_properties(test_layering_control_builds PROPERTIES LABELS engine TIMEOUT 300
                     RUN_SERIAL TRUE)
set_tests_properties(test_layering_upward_include_fails PROPERTIES RUN_SERIAL TRUE)
