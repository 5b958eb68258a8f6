# engine/records: what a run produces (step metrics, evaluations, events, statistics) and its history.
target_sources(engine_records PRIVATE records/run_history.cpp)
