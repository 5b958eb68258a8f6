# engine/report: CSV export.
target_sources(engine_train PRIVATE report/csv.cpp)
