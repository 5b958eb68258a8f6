# tests/engine/nn: finite-difference checks of every layer, model and loss;
# builders, shapes and errors; low-precision rounding and seeded init.
pl_add_test(test_nn
  SOURCES engine/nn/test_layer_gradients.cpp
          engine/nn/test_models.cpp
          engine/nn/test_precision.cpp
          engine/nn/test_loss.cpp
          engine/nn/test_attention_fused.cpp
          engine/nn/test_gpt_layers.cpp
  LIBS engine_core engine_cpu
  LABELS engine
  TIMEOUT 120)
# Block-scaled GEMM layers (MXFP8, MXFP4, NVFP4) against naive references.
pl_add_test(test_block_layers SOURCES engine/nn/test_block_layers.cpp LIBS engine_core engine_cpu LABELS engine TIMEOUT 120)
