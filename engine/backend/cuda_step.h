// The CUDA backend's controls for the step on the device (the module's ABI
// 6 entries): the loss scaler's state in device memory, the optimizer's
// found-inf guard, stream capture into a replayable graph, page-locked
// host memory and the asynchronous read a step later. No CUDA header.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cuda_module.h"

namespace engine {

class Backend;

// One thread at a time (the backend's). Every call throws
// std::runtime_error (std::invalid_argument for what the module refuses,
// such as an allocation during a capture) with the module's one line.
class CudaStepControl {
 public:
  virtual ~CudaStepControl() = default;
  // torch._amp_update_scale_ with the found-inf check (the table's
  // update_scale): the sum of counts[0 .. count) decides, *state changes.
  // mode: PlCudaScaleMode.
  virtual void update_scale(const std::int64_t* counts, std::int64_t count, PlCudaScaleMode mode,
                            double growth_factor, double backoff_factor, std::int64_t growth_interval,
                            PlCudaScaleState* state) = 0;
  // The step state the unscale and the optimizer updates read (null: none).
  virtual void set_step_state(const PlCudaScaleState* state) = 0;
  // Backend calls between these two are recorded into a graph, not run;
  // capture_end returns it (owned by the caller: graph_destroy).
  virtual void capture_begin() = 0;
  virtual PlCudaGraph* capture_end() = 0;
  virtual void graph_launch(PlCudaGraph* graph) = 0;
  virtual void graph_destroy(PlCudaGraph* graph) noexcept = 0;
  // Page-locked host memory: upload sources a graph reads, download_async targets.
  virtual void* host_allocate(std::size_t bytes) = 0;
  virtual void host_release(void* p) noexcept = 0;
  // The step's read, queued: host_dst is valid after wait_mark(a later mark).
  virtual void download_async(void* host_dst, const void* src, std::size_t bytes) = 0;
  virtual std::uint64_t record_mark() = 0;
  virtual void wait_mark(std::uint64_t mark) = 0;
  // While on, upload_rows only gathers the rows into the page-locked
  // staging of its destination (one per destination), which the captured
  // upload of that destination reads when the graph replays.
  virtual void set_gather_only(bool on) = 0;
};

// be's step controls when it is a CUDA backend whose module has ABI 6's
// entries; null otherwise (the CPU and guarded backends: their steps keep
// the host's decision). Valid as long as be.
CudaStepControl* cuda_step_control(Backend& be);

}  // namespace engine
