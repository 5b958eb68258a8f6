# engine/train: run configuration, run history, comparisons, the step loop, the trainer thread.
target_sources(engine_train PRIVATE
  train/run_config.cpp
  train/comparison.cpp
  train/commands.cpp
  train/build_model.cpp
  train/run.cpp
  train/run_statistics.cpp
  train/round_pool.cpp
  train/trainer.cpp
  train/layer_catalog.cpp
  train/sample.cpp
  train/model_defaults.cpp
)
