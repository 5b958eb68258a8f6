# engine/tensor: Tensor storage.
target_sources(engine_core PRIVATE tensor/tensor.cpp)
