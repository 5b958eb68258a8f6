// GemmEngine::Plan: one cached oneDNN matmul primitive and the memory
// objects its executions rebind (gemm.cpp runs them, gemm_plans.cpp makes
// and caches them).
#pragma once

#include <cstddef>
#include <string>

#include "backend/cpu/gemm.h"
#include <dnnl.hpp>

namespace engine::cpu {

struct GemmEngine::Plan {
  dnnl::matmul prim;
  dnnl::memory a, b, c, bias, scratch, alpha;
  std::size_t scratch_bytes = 0;
  bool runtime_alpha = false;  // alpha is an argument of each execution
  bool native_bias = false;  // matmul's own bias (alpha == 1)
  bool binary_bias = false;  // binary-add post-op after the scale (alpha != 1)
  bool manual_bias = false;  // alpha != 1 with a strided C: oneDNN only has ref:any then
  int binary_index = 0;      // post-op index of the binary add
  std::string impl;
};

}  // namespace engine::cpu
