// DnnlContext: the oneDNN CPU engine and stream the backend's primitives run
// on, and an allocation-free way to execute them.
#pragma once

#include <dnnl.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace engine::cpu {

class DnnlContext {
 public:
  DnnlContext() : m_engine(dnnl::engine::kind::cpu, 0), m_stream(m_engine) {}

  const dnnl::engine& engine() const { return m_engine; }
  const dnnl::stream& stream() const { return m_stream; }

  // Executes `p` with `n` arguments and waits. Uses the C API with a caller
  // array: the C++ execute() builds a std::unordered_map and a vector per
  // call, which is an allocation per GEMM in steady state.
  void execute(const dnnl::primitive& p, const dnnl_exec_arg_t* args, int n) const {
    execute_on(m_stream, p, args, n);
  }
  // The same on another stream of this engine (one per thread that runs
  // primitives at the same time).
  static void execute_on(const dnnl::stream& s, const dnnl::primitive& p, const dnnl_exec_arg_t* args, int n) {
    const dnnl_status_t st = dnnl_primitive_execute(p.get(), s.get(), n, args);
    if (st != dnnl_success)
      throw std::runtime_error("oneDNN: primitive execution failed with status " +
                               std::to_string(static_cast<int>(st)));
    dnnl_stream_wait(s.get());
  }

  // Counts primitives created (the caches' steady-state check).
  void count_primitive() { ++m_primitives; }
  std::int64_t primitives_created() const { return m_primitives; }

 private:
  dnnl::engine m_engine;
  dnnl::stream m_stream;
  std::int64_t m_primitives = 0;
};

// Points an existing memory object at `ptr` (no allocation).
inline void set_handle(const dnnl::memory& m, const void* ptr) {
  dnnl_memory_set_data_handle_v2(m.get(), const_cast<void*>(ptr), nullptr);
}

}  // namespace engine::cpu
