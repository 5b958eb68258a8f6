pl_add_test(test_journal SOURCES engine/journal/test_journal.cpp LIBS engine_journal LABELS engine TIMEOUT 300)
pl_add_test(test_weights SOURCES engine/journal/test_weights.cpp LIBS engine_journal LABELS engine TIMEOUT 300)
pl_add_test(test_initial_state SOURCES engine/journal/test_initial_state.cpp LIBS engine_journal LABELS engine)
