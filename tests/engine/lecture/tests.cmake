pl_add_test(test_lecture_presets SOURCES engine/lecture/test_preset.cpp LIBS engine_lecture LABELS engine)
pl_add_test(test_solve_lesson SOURCES engine/lecture/test_solve_lesson.cpp LIBS engine_lecture LABELS engine)
