pl_add_test(test_tensor SOURCES engine/tensor/test_tensor.cpp LIBS engine_tensor engine_cpu LABELS engine)
