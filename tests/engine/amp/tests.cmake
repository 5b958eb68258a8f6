pl_add_test(test_loss_scaler SOURCES engine/amp/test_loss_scaler.cpp LIBS engine_core LABELS engine)
