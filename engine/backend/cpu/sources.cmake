# engine/backend/cpu: the CPU backend (oneDNN + own OpenMP kernels).
# Paths are relative to engine/backend/.
target_sources(engine_cpu PRIVATE
  cpu/cpu_backend.cpp
  cpu/fused_ops.cpp
  cpu/attention.cpp
  cpu/gemm.cpp
  cpu/gemm_plans.cpp
  cpu/gemm_lowp.cpp
  cpu/gemm_small.cpp
  cpu/gemm_small_bf16.cpp
  cpu/fp8_bf16.cpp
  cpu/fp8_bf16_avx512.cpp
  cpu/conv.cpp
  cpu/pool.cpp
  cpu/pool_avx512.cpp
  cpu/elementwise.cpp
  cpu/gelu_avx512.cpp
  cpu/gelu_avx2.cpp
  cpu/gelu_cast_avx512.cpp
  cpu/gelu_cast_avx2.cpp
  cpu/rows.cpp
  cpu/row_kernels.cpp
  cpu/loss.cpp
  cpu/memory.cpp
  cpu/casts.cpp
  cpu/codes.cpp
  cpu/optimizer.cpp
  cpu/census.cpp
  cpu/channels.cpp
  cpu/step_kernels.cpp
  cpu/sgd_fp16_avx2.cpp
)
# The reduced-precision emulation rounds after every multiply and add; a
# contracted FMA would skip a rounding and break bit-exactness with the
# sequential reference (the conformance suite checks it).
set_source_files_properties(cpu/gemm_lowp.cpp cpu/rows.cpp cpu/step_kernels.cpp PROPERTIES COMPILE_OPTIONS "-ffp-contract=off")
# (GCC notes the ABI of its 64-byte vector type in the baseline clone's
# inlined helpers: -Wno-psabi.)
set_source_files_properties(cpu/row_kernels.cpp PROPERTIES COMPILE_OPTIONS "-ffp-contract=off;-Wno-psabi")
# Compiled for AVX-512BW, called only after a run-time CPU check.
set_source_files_properties(cpu/fp8_bf16_avx512.cpp PROPERTIES COMPILE_OPTIONS "-mavx512f;-mavx512bw")
set_source_files_properties(cpu/pool_avx512.cpp PROPERTIES COMPILE_OPTIONS "-mavx512f")
set_source_files_properties(cpu/gemm_small_bf16.cpp PROPERTIES COMPILE_OPTIONS
                            "-mavx512f;-mavx512bw;-mavx512vl;-mavx512bf16;$<$<CXX_COMPILER_ID:GNU>:-Wno-maybe-uninitialized>")
# GELU's f32 lanes and softmax's exp: compiled for their ISA, called after a
# run-time check; glibc's libmvec provides the vector exp. No contraction:
# the lanes must round as the element-by-element code in elementwise.cpp.
# (GCC 12 warns falsely inside its own avx512fintrin.h conversions.)
set_source_files_properties(cpu/gelu_avx512.cpp PROPERTIES COMPILE_OPTIONS
                            "-mavx512f;-ffp-contract=off;$<$<CXX_COMPILER_ID:GNU>:-Wno-maybe-uninitialized>")
# -fno-trapping-math: without it GCC 12 keeps the selects of gelu_parts as
# branches under AVX2 (no masked vector ops) and leaves the loops scalar; the
# values are the same either way (no code reads the FP exception flags).
# The FP8 cast's GELU: its exact lanes round as gelu_avx512.cpp's (no
# contraction); its approximation is in explicit intrinsics.
set_source_files_properties(cpu/gelu_cast_avx512.cpp PROPERTIES COMPILE_OPTIONS
                            "-mavx512f;-ffp-contract=off;$<$<CXX_COMPILER_ID:GNU>:-Wno-maybe-uninitialized>;$<$<CXX_COMPILER_ID:GNU>:-Wno-uninitialized>")
set_source_files_properties(cpu/gelu_avx2.cpp PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-ffp-contract=off;-fno-trapping-math")
# The fp16 recipe's fused optimizer block: F16C lanes, rounded as
# step_kernels.cpp's plain expressions (no contraction).
set_source_files_properties(cpu/sgd_fp16_avx2.cpp PROPERTIES COMPILE_OPTIONS "-mavx2;-mf16c;-ffp-contract=off")
set_source_files_properties(cpu/gelu_cast_avx2.cpp PROPERTIES COMPILE_OPTIONS
                            "-mavx2;-mfma;-ffp-contract=off;-fno-trapping-math;$<$<CXX_COMPILER_ID:GNU>:-Wno-maybe-uninitialized>")
target_link_libraries(engine_cpu PRIVATE mvec)
