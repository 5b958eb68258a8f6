# engine/train: run configuration, the step loop, the trainer thread.
target_sources(engine_train PRIVATE
  train/run_config.cpp
  train/run.cpp
  train/trainer.cpp
)
