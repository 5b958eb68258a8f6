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

# LAPACK is a peer for tests and benchmarks, never a product dependency:
# OpenBLAS (Debian's libopenblas-dev, which carries LAPACK) links here only.
find_library(PL_OPENBLAS NAMES openblas)
if(PL_OPENBLAS)
  pl_add_test(test_solve_lapack_peer
    SOURCES engine/solve/test_lapack_peer.cpp
    LIBS engine_solve ${PL_OPENBLAS}
    LABELS engine
    TIMEOUT 300)
else()
  message(STATUS "OpenBLAS not found: test_solve_lapack_peer and bench_solve are not built (scripts/setup.sh installs it)")
endif()
