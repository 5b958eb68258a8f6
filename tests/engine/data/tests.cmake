# tests/engine/data: IDX reader, MNIST-format folders, generated sets, sampler and batches.
pl_add_test(test_data
  SOURCES engine/data/test_idx.cpp
          engine/data/test_mnist_folder.cpp
          engine/data/test_synthetic.cpp
          engine/data/test_sampler.cpp
  LIBS engine_data ZLIB::ZLIB
  LABELS engine
  TIMEOUT 120)
# Text data sets (the Jargon File corpus when jargon-text is installed).
pl_add_test(test_text
  SOURCES engine/data/test_text.cpp
  LIBS engine_data ZLIB::ZLIB
  LABELS engine
  TIMEOUT 120)
# upload_batch through the backends (text windows, and the old sets' bytes).
pl_add_test(test_upload_batch
  SOURCES engine/data/test_upload_batch.cpp
  LIBS engine_data engine_backends
  LABELS engine
  TIMEOUT 120)
