pl_add_test(test_run_config SOURCES engine/train/test_run_config.cpp LIBS engine_train LABELS engine)
pl_add_test(test_trainer SOURCES engine/train/test_trainer.cpp LIBS engine_train LABELS engine TIMEOUT 300)
pl_add_test(test_comparison SOURCES engine/train/test_comparison.cpp LIBS engine_train LABELS engine)
pl_add_test(test_faults SOURCES engine/train/test_faults.cpp LIBS engine_train LABELS engine)
pl_add_test(test_stress SOURCES engine/train/test_stress.cpp LIBS engine_journal LABELS engine TIMEOUT 600)
pl_add_test(test_guarded SOURCES engine/train/test_guarded.cpp LIBS engine_train LABELS engine TIMEOUT 300)
pl_add_test(test_layer_catalog SOURCES engine/train/test_layer_catalog.cpp LIBS engine_train LABELS engine)
# The trainer and fault tests again on the guarded backend (docs/ARCHITECTURE.md
# "The backend contract"): a host access to step memory would crash them.
# Label guarded: the release suite runs them; under ASan the same runs are
# checked once, on the CPU backend.
add_test(NAME test_trainer_guarded COMMAND test_trainer --gtest_brief=1)
add_test(NAME test_faults_guarded COMMAND test_faults --gtest_brief=1)
set_tests_properties(test_trainer_guarded test_faults_guarded PROPERTIES
  LABELS "engine;guarded" ENVIRONMENT "PL_TEST_BACKEND=guarded" TIMEOUT 300 WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
pl_add_test(test_gpt SOURCES engine/train/test_gpt.cpp LIBS engine_train LABELS engine TIMEOUT 300)
pl_add_test(test_sample SOURCES engine/train/test_sample.cpp LIBS engine_train LABELS engine TIMEOUT 300)
