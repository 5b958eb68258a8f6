# tests/engine/data: IDX reader, MNIST-format folders, generated sets, sampler and batches.
pl_add_test(test_data
  SOURCES engine/data/test_idx.cpp
          engine/data/test_mnist_folder.cpp
          engine/data/test_synthetic.cpp
          engine/data/test_sampler.cpp
  LIBS engine_data ZLIB::ZLIB
  LABELS engine
  TIMEOUT 120)
