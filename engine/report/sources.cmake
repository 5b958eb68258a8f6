# engine/report: the CSV files of runs, written and read through one column table.
target_sources(engine_report PRIVATE report/csv.cpp report/text_samples.cpp)
