// Convolution on oneDNN: cached primitives per shape/direction/type, with
// oneDNN's preferred (blocked) layouts and reorders from/to the engine's
// plain NCHW/OIHW f32 tensors.
#include "backend/cpu/conv.h"

#include <stdexcept>
#include <vector>

namespace engine::cpu {

namespace {
using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;
using dims = dnnl::memory::dims;
using md_t = dnnl::memory::desc;

bool is_bf16_exact(Format f) { return f == Format::BF16 || f == Format::E4M3 || f == Format::E5M2; }
}  // namespace

// One primitive argument: the caller's plain f32 memory and, when oneDNN
// wants another layout or bf16, the primitive's own memory and the reorder
// between the two (user -> inner for inputs, inner -> user for outputs).
struct ConvEngine::Plan {
  struct Arg {
    int dnnl_arg = 0;
    bool output = false;
    bool reordered = false;
    dnnl::memory user;
    dnnl::memory inner;
    dnnl::reorder reorder;
  };
  dnnl::primitive prim;
  std::vector<Arg> args;  // in the order of the caller's pointers
  dnnl::memory scratch;
  std::size_t scratch_bytes = 0;
  std::string impl;
  // A BF16-coded input's reorder is oneDNN's reference loop ("simple:any":
  // on CPUs without AVX-512, about 4x slower than decoding first).
  bool slow_codes = false;
};

ConvEngine::ConvEngine(DnnlContext& ctx, bool native_bf16) : m_ctx(ctx), m_native_bf16(native_bf16) {}
ConvEngine::~ConvEngine() = default;

std::size_t ConvEngine::KeyHash::operator()(const Key& k) const {
  std::uint64_t h = 1469598103934665603ull;
  auto mix = [&h](std::uint64_t v) { h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2); };
  for (std::int64_t v : {k.n, k.c_in, k.h, k.w, k.c_out, k.kh, k.kw, k.stride, k.pad})
    mix(static_cast<std::uint64_t>(v));
  mix(static_cast<std::uint64_t>(k.dir) | (k.bf16 ? 8u : 0u) | (k.has_bias ? 16u : 0u) | (k.x_bf16 ? 32u : 0u) |
      (k.dy_bf16 ? 64u : 0u));
  return static_cast<std::size_t>(h);
}

ConvEngine::Key ConvEngine::key_of(const ConvShape& s, Dir dir, Format compute, bool has_bias) const {
  // BF16/FP8 values are exact in bf16, so on a native-bf16 CPU they run the
  // bf16 kernels (f32 accumulation and f32 results); everything else f32.
  // Except with fewer than 16 input channels (the first layer, c_in = 1):
  // there oneDNN's bf16 kernels were slower than f32 (measured: forward
  // 0.83 vs 0.75 ms, backward-weights 1.18 vs 0.86 ms at 128x1x28x28 -> 32,
  // 5x5), and f32 is exact for these values too.
  const bool bf16 = m_native_bf16 && is_bf16_exact(compute) && s.c_in >= 16;
  return Key{s.n, s.c_in, s.h, s.w, s.c_out, s.kh, s.kw, s.stride, s.pad, dir, bf16, has_bias};
}

ConvEngine::Plan& ConvEngine::plan_for(const Key& k) {
  if (auto it = m_plans.find(k); it != m_plans.end()) return *it->second;
  if (m_plans.size() >= 256) m_plans.clear();

  const dnnl::engine& eng = m_ctx.engine();
  const std::int64_t oh = (k.h + 2 * k.pad - k.kh) / k.stride + 1;
  const std::int64_t ow = (k.w + 2 * k.pad - k.kw) / k.stride + 1;
  const dims xs{k.n, k.c_in, k.h, k.w}, ws{k.c_out, k.c_in, k.kh, k.kw}, ys{k.n, k.c_out, oh, ow},
      bs{k.c_out};
  const dims strides{k.stride, k.stride}, pads{k.pad, k.pad};
  const dt lo = k.bf16 ? dt::bf16 : dt::f32;

  // Blocked layouts (format `any`) are 2-3x faster than plain NCHW here
  // (oneDNN's direct jit kernels instead of im2col + gemm), reorders
  // included. Exception, measured: backward-data with few input channels
  // (the first layer, c_in = 1) is 4x slower blocked than plain.
  const bool plain = k.dir == Dir::BackwardData && k.c_in < 16;
  auto choose = [plain](const dims& d, dt t, tag plain_tag) {
    return md_t(d, t, plain ? plain_tag : tag::any);
  };
  // The caller's memory: f32, or BF16 codes for x (forward, weights) and
  // dy (backward); y and dx are always f32.
  const md_t x_user(xs, k.x_bf16 ? dt::bf16 : dt::f32, tag::nchw), w_user(ws, dt::f32, tag::oihw),
      y_user(ys, dt::f32, tag::nchw), dy_user(ys, k.dy_bf16 ? dt::bf16 : dt::f32, tag::nchw),
      dx_user(xs, dt::f32, tag::nchw), b_user(bs, dt::f32, tag::x);
  const md_t x_lo = choose(xs, lo, tag::nchw), w_lo = choose(ws, lo, tag::oihw),
             y_lo = choose(ys, lo, tag::nchw);
  const md_t x_f32 = choose(xs, dt::f32, tag::nchw), w_f32 = choose(ws, dt::f32, tag::oihw),
             y_f32 = choose(ys, dt::f32, tag::nchw);

  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const auto fwd_prop = dnnl::prop_kind::forward_training;
  const auto alg = dnnl::algorithm::convolution_direct;

  auto plan = std::make_unique<Plan>();
  // (arg, user desc, primitive desc, output?) in the caller's pointer order.
  struct Spec {
    int arg;
    md_t user, inner;
    bool output;
  };
  std::vector<Spec> specs;
  md_t scratch_md;
  try {
    if (k.dir == Dir::Forward) {
      const auto d = k.has_bias
                         ? dnnl::convolution_forward::desc(fwd_prop, alg, x_lo, w_lo, b_user, y_f32,
                                                           strides, pads, pads)
                         : dnnl::convolution_forward::desc(fwd_prop, alg, x_lo, w_lo, y_f32, strides,
                                                           pads, pads);
      const dnnl::convolution_forward::primitive_desc pd(d, attr, eng);
      plan->prim = dnnl::convolution_forward(pd);
      plan->impl = pd.impl_info_str();
      scratch_md = pd.scratchpad_desc();
      specs = {{DNNL_ARG_SRC, x_user, pd.src_desc(), false},
               {DNNL_ARG_WEIGHTS, w_user, pd.weights_desc(), false}};
      if (k.has_bias) specs.push_back({DNNL_ARG_BIAS, b_user, pd.bias_desc(), false});
      specs.push_back({DNNL_ARG_DST, y_user, pd.dst_desc(), true});
    } else if (k.dir == Dir::BackwardData) {
      const dnnl::convolution_forward::primitive_desc hint(
          dnnl::convolution_forward::desc(fwd_prop, alg, x_lo, w_lo, y_lo, strides, pads, pads), eng);
      const dnnl::convolution_backward_data::primitive_desc pd(
          dnnl::convolution_backward_data::desc(alg, x_f32, w_lo, y_lo, strides, pads, pads), attr,
          eng, hint);
      plan->prim = dnnl::convolution_backward_data(pd);
      plan->impl = pd.impl_info_str();
      scratch_md = pd.scratchpad_desc();
      specs = {{DNNL_ARG_DIFF_DST, dy_user, pd.diff_dst_desc(), false},
               {DNNL_ARG_WEIGHTS, w_user, pd.weights_desc(), false},
               {DNNL_ARG_DIFF_SRC, dx_user, pd.diff_src_desc(), true}};
    } else {
      const auto hd = k.has_bias ? dnnl::convolution_forward::desc(fwd_prop, alg, x_lo, w_lo, b_user,
                                                                  y_lo, strides, pads, pads)
                                 : dnnl::convolution_forward::desc(fwd_prop, alg, x_lo, w_lo, y_lo,
                                                                  strides, pads, pads);
      const dnnl::convolution_forward::primitive_desc hint(hd, eng);
      const auto d = k.has_bias ? dnnl::convolution_backward_weights::desc(
                                      alg, x_lo, w_f32, b_user, y_lo, strides, pads, pads)
                                : dnnl::convolution_backward_weights::desc(alg, x_lo, w_f32, y_lo,
                                                                           strides, pads, pads);
      const dnnl::convolution_backward_weights::primitive_desc pd(d, attr, eng, hint);
      plan->prim = dnnl::convolution_backward_weights(pd);
      plan->impl = pd.impl_info_str();
      scratch_md = pd.scratchpad_desc();
      specs = {{DNNL_ARG_SRC, x_user, pd.src_desc(), false},
               {DNNL_ARG_DIFF_DST, dy_user, pd.diff_dst_desc(), false},
               {DNNL_ARG_DIFF_WEIGHTS, w_user, pd.diff_weights_desc(), true}};
      if (k.has_bias) specs.push_back({DNNL_ARG_DIFF_BIAS, b_user, pd.diff_bias_desc(), true});
    }
    m_ctx.count_primitive();

    for (const Spec& s : specs) {
      Plan::Arg a;
      a.dnnl_arg = s.arg;
      a.output = s.output;
      a.user = dnnl::memory(s.user, eng, DNNL_MEMORY_NONE);
      a.reordered = s.inner != s.user;
      if (a.reordered) {
        // The primitive's copy lives as long as the plan (allocated once).
        a.inner = dnnl::memory(s.inner, eng);
        if (s.output) {
          a.reorder = dnnl::reorder(a.inner, a.user);
        } else {
          const dnnl::reorder::primitive_desc rpd(a.user, a.inner);
          if (s.user.data_type() == dt::bf16 && std::string(rpd.impl_info_str()).rfind("simple", 0) == 0)
            plan->slow_codes = true;
          a.reorder = dnnl::reorder(rpd);
        }
        m_ctx.count_primitive();
      }
      plan->args.push_back(std::move(a));
    }
  } catch (const dnnl::error& e) {
    throw std::runtime_error("oneDNN convolution " + std::to_string(k.n) + "x" +
                             std::to_string(k.c_in) + "x" + std::to_string(k.h) + "x" +
                             std::to_string(k.w) + " -> " + std::to_string(k.c_out) + ": " + e.what());
  }
  plan->scratch_bytes = scratch_md.get_size();
  plan->scratch = dnnl::memory(scratch_md, eng, DNNL_MEMORY_NONE);
  Plan& ref = *plan;
  m_plans.emplace(k, std::move(plan));
  return ref;
}

void ConvEngine::run(Plan& p, const void* const* user_ptrs) {
  dnnl_exec_arg_t args[8];
  int nargs = 0;
  const std::size_t count = p.args.size();
  for (std::size_t i = 0; i < count; ++i) {
    Plan::Arg& a = p.args[i];
    set_handle(a.user, user_ptrs[i]);
    if (a.reordered && !a.output) {
      const dnnl_exec_arg_t r[2] = {{DNNL_ARG_FROM, a.user.get()}, {DNNL_ARG_TO, a.inner.get()}};
      m_ctx.execute(a.reorder, r, 2);
    }
    args[nargs++] = {a.dnnl_arg, a.reordered ? a.inner.get() : a.user.get()};
  }
  if (p.scratch_bytes > 0) {
    set_handle(p.scratch, m_scratch.get(p.scratch_bytes));
    args[nargs++] = {DNNL_ARG_SCRATCHPAD, p.scratch.get()};
  }
  m_ctx.execute(p.prim, args, nargs);
  for (std::size_t i = 0; i < count; ++i) {
    Plan::Arg& a = p.args[i];
    if (a.reordered && a.output) {
      const dnnl_exec_arg_t r[2] = {{DNNL_ARG_FROM, a.inner.get()}, {DNNL_ARG_TO, a.user.get()}};
      m_ctx.execute(a.reorder, r, 2);
    }
  }
  m_last_impl = &p.impl;
}

bool ConvEngine::forward(const ConvShape& s, Format compute, ConvInput x, const float* w, const float* bias,
                         float* y) {
  Key k = key_of(s, Dir::Forward, compute, bias != nullptr);
  k.x_bf16 = x.format == Format::BF16;
  Plan& p = plan_for(k);
  if (p.slow_codes) return false;
  const void* ptrs[4];
  int i = 0;
  ptrs[i++] = x.data;
  ptrs[i++] = w;
  if (bias) ptrs[i++] = bias;
  ptrs[i++] = y;
  run(p, ptrs);
  return true;
}

bool ConvEngine::backward_data(const ConvShape& s, Format compute, ConvInput dy, const float* w, float* dx) {
  Key k = key_of(s, Dir::BackwardData, compute, false);
  k.dy_bf16 = dy.format == Format::BF16;
  Plan& p = plan_for(k);
  if (p.slow_codes) return false;
  const void* ptrs[3] = {dy.data, w, dx};
  run(p, ptrs);
  return true;
}

bool ConvEngine::backward_weights(const ConvShape& s, Format compute, ConvInput x, ConvInput dy, float* dw,
                                  float* db) {
  Key k = key_of(s, Dir::BackwardWeights, compute, db != nullptr);
  k.x_bf16 = x.format == Format::BF16;
  k.dy_bf16 = dy.format == Format::BF16;
  Plan& p = plan_for(k);
  if (p.slow_codes) return false;
  const void* ptrs[4] = {x.data, dy.data, dw, db};
  run(p, ptrs);
  return true;
}

}  // namespace engine::cpu
