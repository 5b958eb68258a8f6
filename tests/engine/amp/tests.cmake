pl_add_test(test_loss_scaler SOURCES engine/amp/test_loss_scaler.cpp LIBS engine_amp engine_cpu LABELS engine)
pl_add_test(test_recipes SOURCES engine/amp/test_recipes.cpp LIBS engine_train LABELS engine)
pl_add_test(test_memory SOURCES engine/amp/test_memory.cpp LIBS engine_train LABELS engine)
pl_add_test(test_block_recipes SOURCES engine/amp/test_block_recipes.cpp LIBS engine_train LABELS engine TIMEOUT 120)
# The recipe tests' whole runs again on the guarded backend (docs/ARCHITECTURE.md
# "The backend contract"): a host access to step memory would crash them. The
# layer-level cases of test_recipes hand host tensors to the CPU backend and
# stay on it in both runs.
# Label guarded: the release suite runs them; under ASan the same runs are
# checked once, on the CPU backend.
add_test(NAME test_recipes_guarded COMMAND test_recipes --gtest_brief=1)
add_test(NAME test_block_recipes_guarded COMMAND test_block_recipes --gtest_brief=1)
set_tests_properties(test_recipes_guarded test_block_recipes_guarded PROPERTIES
  LABELS "engine;guarded" ENVIRONMENT "PL_TEST_BACKEND=guarded" TIMEOUT 600 WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
# The longest test of the suite (mprotect on every backend call): started
# first so it overlaps the rest under ctest -j.
set_tests_properties(test_block_recipes_guarded PROPERTIES COST 10000)
