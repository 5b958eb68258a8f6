# engine/journal: a run folder written as the runs go, and read back (past runs, replay).
target_sources(engine_journal PRIVATE journal/journal.cpp journal/weights.cpp journal/npy.cpp
                                      journal/initial_state.cpp)
