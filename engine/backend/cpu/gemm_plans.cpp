// GemmEngine's plan cache: the oneDNN matmul primitive for each product's
// key (shape, formats, alpha, bias, batch strides, slice), made once and
// executed with the call's pointers.
#include <omp.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>

#include "backend/cpu/gemm.h"
#include "backend/cpu/gemm_parts.h"
#include "backend/cpu/gemm_plan.h"

namespace engine::cpu {

using namespace gemm_parts;

std::size_t GemmEngine::KeyHash::operator()(const Key& k) const {
  std::uint64_t h = 1469598103934665603ull;
  auto mix = [&h](std::uint64_t v) {
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  };
  mix(static_cast<std::uint64_t>(k.m));
  mix(static_cast<std::uint64_t>(k.n));
  mix(static_cast<std::uint64_t>(k.k));
  mix(static_cast<std::uint64_t>(k.lda));
  mix(static_cast<std::uint64_t>(k.ldb));
  mix(static_cast<std::uint64_t>(k.ldc));
  mix(k.alpha_bits);
  for (std::int64_t v : {k.batch0, k.batch1, k.sa0, k.sa1, k.sb0, k.sb1, k.sc0, k.sc1})
    mix(static_cast<std::uint64_t>(v));
  mix((k.trans_a ? 1u : 0u) | (k.trans_b ? 2u : 0u) | (k.bf16 ? 4u : 0u) | (k.has_bias ? 8u : 0u) |
      (k.has_beta ? 16u : 0u) | (k.runtime_alpha ? 32u : 0u));
  mix(static_cast<std::uint64_t>(k.slice + 1));
  return static_cast<std::size_t>(h);
}

// Bounded: a caller cycling through many alphas or shapes must not grow the
// cache without limit (training uses a few dozen entries; a process that
// trains many models on one backend, with one plan per thread for each
// sliced GEMM, reaches the bound). Room is made before a call takes its
// plans, never between them: run_sliced holds one plan per thread, and
// clearing the cache halfway through its lookups freed the plans it held
// (a crash inside oneDNN on a 16-thread machine, bench_train's mlp-wide).
void GemmEngine::make_room(std::size_t plans) {
  if (m_plans.size() + plans <= kMaxPlans) return;
  m_plans.clear();
  m_last_impl = nullptr;
}

GemmEngine::Plan& GemmEngine::plan_for(const Key& key) {
  if (auto it = m_plans.find(key); it != m_plans.end()) return *it->second;
  make_room(1);

  const dnnl::engine& eng = m_ctx.engine();
  const dt in = key.bf16 ? dt::bf16 : dt::f32;
  // Transposes are strides, never copies: op(A) is m x k with strides
  // (lda, 1), or (1, lda) when A is stored k x m.
  // Batched: two leading batch dimensions with the operands' own strides.
  const bool batched = key.batch0 != 1 || key.batch1 != 1;
  auto md = [&](std::int64_t rows, std::int64_t cols, dt type, bool trans, std::int64_t ld, std::int64_t s0,
                std::int64_t s1) {
    const dims strides = trans ? dims{1, ld} : dims{ld, 1};
    if (!batched) return dnnl::memory::desc({rows, cols}, type, strides);
    return dnnl::memory::desc({key.batch0, key.batch1, rows, cols}, type, dims{s0, s1, strides[0], strides[1]});
  };
  const dnnl::memory::desc a_md = md(key.m, key.k, in, key.trans_a, key.lda, key.sa0, key.sa1);
  const dnnl::memory::desc b_md = md(key.k, key.n, in, key.trans_b, key.ldb, key.sb0, key.sb1);
  const dnnl::memory::desc c_md = md(key.m, key.n, dt::f32, false, key.ldc, key.sc0, key.sc1);
  const dnnl::memory::desc bias_md({1, key.n}, dt::f32, dims{key.n, 1});
  const float alpha = std::bit_cast<float>(key.alpha_bits);

  auto plan = std::make_unique<Plan>();
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  // oneDNN computes dst = scale * (acc + bias), then post-ops in order. So
  // the matmul's bias is only right for alpha == 1; otherwise the bias is a
  // binary add after the sum post-op.
  const bool scaled = key.runtime_alpha || alpha != 1.0f;
  if (key.runtime_alpha) attr.set_output_scales(0, {DNNL_RUNTIME_F32_VAL});
  else if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
  dnnl::post_ops po;
  if (key.has_beta) po.append_sum(1.0f);
  plan->runtime_alpha = key.runtime_alpha;
  plan->native_bias = key.has_bias && !scaled;
  plan->binary_bias = key.has_bias && scaled && key.ldc == key.n;
  plan->manual_bias = key.has_bias && scaled && key.ldc != key.n;
  if (plan->binary_bias) {
    plan->binary_index = po.len();
    po.append_binary(dnnl::algorithm::binary_add, bias_md);
  }
  attr.set_post_ops(po);

  // A slice's primitive runs inside run_sliced's parallel region on one
  // thread: it is planned for one (oneDNN plans for omp_get_max_threads()).
  struct Threads {
    int saved = omp_get_max_threads();
    explicit Threads(bool one) {
      if (one) omp_set_num_threads(1);
    }
    ~Threads() { omp_set_num_threads(saved); }
  } threads(key.slice >= 0);
  try {
    const dnnl::matmul::desc desc = plan->native_bias ? dnnl::matmul::desc(a_md, b_md, bias_md, c_md)
                                                      : dnnl::matmul::desc(a_md, b_md, c_md);
    const dnnl::matmul::primitive_desc pd(desc, attr, eng);
    plan->prim = dnnl::matmul(pd);
    plan->impl = pd.impl_info_str();
    const dnnl::memory::desc scratch_md = pd.scratchpad_desc();
    plan->scratch_bytes = scratch_md.get_size();
    plan->scratch = dnnl::memory(scratch_md, eng, DNNL_MEMORY_NONE);
  } catch (const dnnl::error& e) {
    throw std::runtime_error(std::string("oneDNN matmul ") + std::to_string(key.m) + "x" +
                             std::to_string(key.n) + "x" + std::to_string(key.k) + ": " + e.what());
  }
  m_ctx.count_primitive();
  plan->a = dnnl::memory(a_md, eng, DNNL_MEMORY_NONE);
  plan->b = dnnl::memory(b_md, eng, DNNL_MEMORY_NONE);
  plan->c = dnnl::memory(c_md, eng, DNNL_MEMORY_NONE);
  plan->bias = dnnl::memory(bias_md, eng, DNNL_MEMORY_NONE);
  plan->alpha = dnnl::memory(dnnl::memory::desc({1}, dt::f32, dnnl::memory::format_tag::x), eng, DNNL_MEMORY_NONE);
  Plan& ref = *plan;
  m_plans.emplace(key, std::move(plan));
  return ref;
}

GemmEngine::Key GemmEngine::key_of(const GemmArgs& g, std::int64_t lda, std::int64_t ldb, std::int64_t ldc,
                                   bool bf16, float alpha) {
  Key key;
  key.m = g.m;
  key.n = g.n;
  key.k = g.k;
  key.lda = lda;
  key.ldb = ldb;
  key.ldc = ldc;
  key.alpha_bits = std::bit_cast<std::uint32_t>(alpha);
  key.trans_a = g.a.trans;
  key.trans_b = g.b.trans;
  key.bf16 = bf16;
  key.has_beta = g.beta != 0.0f;
  if (g.batched()) {
    key.batch0 = g.batch[0];
    key.batch1 = g.batch[1];
    key.sa0 = g.a.batch_stride[0];
    key.sa1 = g.a.batch_stride[1];
    key.sb0 = g.b.batch_stride[0];
    key.sb1 = g.b.batch_stride[1];
    key.sc0 = g.c_batch_stride[0];
    key.sc1 = g.c_batch_stride[1];
  }
  return key;
}

void GemmEngine::execute(Plan& p, const void* a, const void* b, float* c, const float* bias) {
  execute_on(p, a, b, c, bias, m_ctx.stream(), m_scratch);
}

void GemmEngine::execute_on(Plan& p, const void* a, const void* b, float* c, const float* bias,
                            const dnnl::stream& s, Workspace& scratch, const float* alpha) {
  set_handle(p.a, a);
  set_handle(p.b, b);
  set_handle(p.c, c);
  dnnl_exec_arg_t args[6];
  int nargs = 0;
  args[nargs++] = {DNNL_ARG_SRC, p.a.get()};
  args[nargs++] = {DNNL_ARG_WEIGHTS, p.b.get()};
  args[nargs++] = {DNNL_ARG_DST, p.c.get()};
  if (p.native_bias || p.binary_bias) {
    set_handle(p.bias, bias);
    args[nargs++] = {p.native_bias ? DNNL_ARG_BIAS
                                   : (DNNL_ARG_ATTR_MULTIPLE_POST_OP(p.binary_index) | DNNL_ARG_SRC_1),
                     p.bias.get()};
  }
  if (p.runtime_alpha) {
    set_handle(p.alpha, alpha);
    args[nargs++] = {DNNL_ARG_ATTR_OUTPUT_SCALES, p.alpha.get()};
  }
  if (p.scratch_bytes > 0) {
    set_handle(p.scratch, scratch.get(p.scratch_bytes));
    args[nargs++] = {DNNL_ARG_SCRATCHPAD, p.scratch.get()};
  }
  DnnlContext::execute_on(s, p.prim, args, nargs);
}

}  // namespace engine::cpu
