# engine/data: IDX reader, MNIST-format folders, generated sets, text, batching.
target_sources(engine_data PRIVATE
  data/idx.cpp
  data/mnist.cpp
  data/synthetic.cpp
  data/dataset.cpp
  data/sampler.cpp
  data/batch.cpp
  data/text.cpp
)
