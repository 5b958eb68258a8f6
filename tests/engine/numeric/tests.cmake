# tests/engine/numeric: formats, scalar reference conversions (against an
# independent reference and the CPU's own instructions), vectorized casts
# against the scalar reference, stochastic rounding.
pl_add_test(test_numeric_format
  SOURCES engine/numeric/test_format.cpp
  LIBS engine_numeric
  LABELS engine)
pl_add_test(test_numeric_convert
  SOURCES engine/numeric/test_convert.cpp
  LIBS engine_numeric
  LABELS engine
  TIMEOUT 300)
pl_add_test(test_numeric_cast
  SOURCES engine/numeric/test_cast.cpp
  LIBS engine_numeric
  LABELS engine
  TIMEOUT 300)
pl_add_test(test_numeric_stochastic
  SOURCES engine/numeric/test_stochastic.cpp
  LIBS engine_numeric
  LABELS engine
  TIMEOUT 300)
pl_add_test(test_numeric_inspect
  SOURCES engine/numeric/test_inspect.cpp
  LIBS engine_numeric
  LABELS engine)
pl_add_test(test_numeric_mx_elements
  SOURCES engine/numeric/test_mx_elements.cpp
  LIBS engine_numeric
  LABELS engine
  TIMEOUT 300)
pl_add_test(test_numeric_block_formats
  SOURCES engine/numeric/test_block_formats.cpp
  LIBS engine_numeric
  LABELS engine
  TIMEOUT 300)
