pl_add_test(test_csv SOURCES engine/report/test_csv.cpp LIBS engine_report LABELS engine)
