pl_add_test(test_run_config SOURCES engine/train/test_run_config.cpp LIBS engine_train LABELS engine)
pl_add_test(test_trainer SOURCES engine/train/test_trainer.cpp LIBS engine_train LABELS engine TIMEOUT 300)
pl_add_test(test_comparison SOURCES engine/train/test_comparison.cpp LIBS engine_train LABELS engine)
