# engine/nn: layers with explicit forward/backward, losses, models and builders.
target_sources(engine_nn PRIVATE
  nn/fp8_scaling.cpp
  nn/layer_io.cpp
  nn/block_gemm.cpp
  nn/linear.cpp
  nn/conv2d.cpp
  nn/maxpool2d.cpp
  nn/pointwise.cpp
  nn/relu.cpp
  nn/gelu.cpp
  nn/layernorm.cpp
  nn/softmax.cpp
  nn/attention.cpp
  nn/flatten.cpp
  nn/mean_pool.cpp
  nn/patch_embed.cpp
  nn/embedding.cpp
  nn/transformer_block.cpp
  nn/loss.cpp
  nn/model.cpp
)
