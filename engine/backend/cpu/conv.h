// ConvEngine: Backend's conv2d forward/backward on oneDNN convolution
// primitives, cached by shape, direction and data type.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "backend/backend.h"
#include "backend/fused.h"
#include "backend/cpu/dnnl_context.h"
#include "backend/cpu/workspace.h"

namespace engine::cpu {

class ConvEngine {
 public:
  ConvEngine(DnnlContext& ctx, bool native_bf16);
  ~ConvEngine();
  ConvEngine(const ConvEngine&) = delete;
  ConvEngine& operator=(const ConvEngine&) = delete;

  // The backend's calling thread. Arguments as in Backend; x and dy as
  // FP32 values or BF16 codes (the primitive's reorder from the caller's
  // memory decodes them: its own copy holds the same values either way).
  // false, running nothing, where oneDNN has only its reference reorder
  // for the codes (no AVX-512): the caller decodes them first, faster.
  bool forward(const ConvShape& s, Format compute, ConvInput x, const float* w, const float* bias, float* y);
  bool backward_data(const ConvShape& s, Format compute, ConvInput dy, const float* w, float* dx);
  bool backward_weights(const ConvShape& s, Format compute, ConvInput x, ConvInput dy, float* dw, float* db);
  std::string last_impl() const { return m_last_impl ? *m_last_impl : std::string(); }

 private:
  enum class Dir : std::uint8_t { Forward, BackwardData, BackwardWeights };
  struct Key {
    std::int64_t n, c_in, h, w, c_out, kh, kw, stride, pad;
    Dir dir;
    bool bf16, has_bias;
    bool x_bf16 = false, dy_bf16 = false;  // the caller's x / dy are BF16 codes
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const;
  };
  struct Plan;
  Plan& plan_for(const Key& key);
  Key key_of(const ConvShape& s, Dir dir, Format compute, bool has_bias) const;
  void run(Plan& p, const void* const* user_ptrs);

  DnnlContext& m_ctx;
  bool m_native_bf16;
  std::unordered_map<Key, std::unique_ptr<Plan>, KeyHash> m_plans;
  Workspace m_scratch;
  const std::string* m_last_impl = nullptr;
};

}  // namespace engine::cpu
