# engine/solve: dense matrices, LU in any format, iterative refinement.
target_sources(engine_solve PRIVATE
  solve/matrix.cpp
  solve/lu.cpp
  solve/refine.cpp
  solve/kernels.cpp
)
# The definitions in lu.h round a product before subtracting it: no
# contraction into fused multiply-adds.
target_compile_options(engine_solve PRIVATE -ffp-contract=off)
