# tests/engine/solve: matrices, LU in every format against a scalar
# reference, iterative refinement; LAPACK (OpenBLAS) as the peer.
foreach(t matrix lu refine)
  pl_add_test(test_solve_${t}
    SOURCES engine/solve/test_${t}.cpp
    LIBS engine_solve
    LABELS engine
    TIMEOUT 300)
  target_compile_options(test_solve_${t} PRIVATE -ffp-contract=off)
endforeach()
