# engine/numeric: formats, scalar reference conversions, bulk casts.
target_sources(engine_numeric PRIVATE
  numeric/format.cpp
  numeric/convert.cpp
  numeric/inspect.cpp
  numeric/block.cpp
  numeric/cast.cpp
  numeric/cast_f16c.cpp
  numeric/cast_avx512.cpp
)
# Vectorized paths are compiled for their ISA and only called after a
# run-time CPU check: the shipped binary never needs -march=native.
set_source_files_properties(numeric/cast_f16c.cpp PROPERTIES COMPILE_OPTIONS "-mavx2;-mf16c;-mfma")
set_source_files_properties(numeric/cast_avx512.cpp PROPERTIES
  COMPILE_OPTIONS "-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512bf16;-mf16c")
