# tests/engine/optim: optimizers against double-precision PyTorch formulas, clipping, schedules.
pl_add_test(test_optim
  SOURCES engine/optim/test_sgd.cpp
          engine/optim/test_adam.cpp
          engine/optim/test_state_format.cpp
          engine/optim/test_clip.cpp
          engine/optim/test_schedule.cpp
          engine/optim/test_alloc.cpp
  LIBS engine_core engine_cpu
  LABELS engine
  TIMEOUT 120)
