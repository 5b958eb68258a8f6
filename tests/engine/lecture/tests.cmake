pl_add_test(test_lecture_presets SOURCES engine/lecture/test_preset.cpp LIBS engine_lecture LABELS engine)
