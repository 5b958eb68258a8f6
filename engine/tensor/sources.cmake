# engine/tensor: Tensor storage.
target_sources(engine_tensor PRIVATE tensor/tensor.cpp)
