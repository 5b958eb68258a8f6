pl_add_test(test_loss_scaler SOURCES engine/amp/test_loss_scaler.cpp LIBS engine_cpu LABELS engine)
pl_add_test(test_recipes SOURCES engine/amp/test_recipes.cpp LIBS engine_train LABELS engine)
pl_add_test(test_memory SOURCES engine/amp/test_memory.cpp LIBS engine_train LABELS engine)
pl_add_test(test_block_recipes SOURCES engine/amp/test_block_recipes.cpp LIBS engine_train LABELS engine TIMEOUT 120)
