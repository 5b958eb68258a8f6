# engine/optim: SGD, Adam/AdamW, global-norm clipping, learning-rate schedules.
target_sources(engine_optim PRIVATE
  optim/optimizer.cpp
  optim/sgd.cpp
  optim/adam.cpp
  optim/clip.cpp
  optim/schedule.cpp
)
# sqrt without errno (never negative here: v >= 0) lets the Adam loop vectorize.
set_source_files_properties(optim/adam.cpp PROPERTIES COMPILE_OPTIONS "-fno-math-errno")
