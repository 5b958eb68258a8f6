// The step captured once (ABI 6): stream capture of the context's stream
// into a CUDA graph that is replayed step after step, the memory a graph
// keeps for the host arguments it captured, and the marks the host waits
// on to read a step's results a step later.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <new>

#include "backend/cuda/context.cuh"
#include "backend/cuda/cuda_check.cuh"
#include "backend/cuda/step_ops.cuh"
#include "backend/cuda_module.h"

namespace pl_cuda {

PlCudaStatus refuse_in_capture(PlCudaContext* ctx, const char* fn, ErrorSink sink) {
  if (!ctx->capturing) return PL_CUDA_OK;
  return fail(sink, PL_CUDA_INVALID_ARGUMENT,
              "%s: not during a capture (run the step once uncaptured first, so its buffers exist, and read "
              "results with download_async)",
              fn);
}

PlCudaStatus stage_host_args(PlCudaContext* ctx, const void* host, std::size_t bytes, void* scratch_slot,
                             void** out, ErrorSink sink) {
  *out = scratch_slot;
  if (bytes == 0) return PL_CUDA_OK;
  if (!ctx->capturing) {
    // From pageable memory: staged by the runtime before the call returns.
    PL_CUDA_CHECK(sink, cudaMemcpyAsync(scratch_slot, host, bytes, cudaMemcpyHostToDevice, ctx->stream));
    return PL_CUDA_OK;
  }
  // A captured copy would read the host vector when the graph runs, long
  // after it is gone: the arguments go into memory the graph keeps, written
  // now (relaxed capture mode allows cudaMalloc and a synchronous copy that
  // does not touch the capturing stream).
  void* p = nullptr;
  PL_CUDA_CHECK(sink, cudaMalloc(&p, bytes));
  ctx->keep.push_back(p);
  PL_CUDA_CHECK(sink, cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice));
  *out = p;
  return PL_CUDA_OK;
}

void destroy_marks(PlCudaContext* ctx) {
  for (cudaEvent_t& e : ctx->marks) {
    if (e) cudaEventDestroy(e);
    e = nullptr;
  }
}

PlCudaStatus capture_begin(PlCudaContext* ctx, char* message, std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "capture_begin");
  if (ctx->capturing) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "capture_begin: a capture is already running");
  PL_CUDA_CHECK(sink, cudaStreamBeginCapture(ctx->stream, cudaStreamCaptureModeRelaxed));
  ctx->capturing = true;
  ctx->keep.clear();
  return PL_CUDA_OK;
}

PlCudaStatus capture_end(PlCudaContext* ctx, PlCudaGraph** graph, char* message, std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "capture_end");
  if (!graph) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "capture_end: graph is null");
  *graph = nullptr;
  if (!ctx->capturing) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "capture_end: no capture is running");
  ctx->capturing = false;
  auto* g = new (std::nothrow) PlCudaGraph;
  if (!g) return fail(sink, PL_CUDA_OUT_OF_MEMORY, "capture_end: out of host memory");
  g->keep.swap(ctx->keep);
  auto abandon = [&](PlCudaStatus s) {
    if (g->exec) cudaGraphExecDestroy(g->exec);
    if (g->graph) cudaGraphDestroy(g->graph);
    for (void* p : g->keep) cudaFree(p);
    delete g;
    return s;
  };
  // An entry that failed during the capture invalidated it: EndCapture says so.
  if (const cudaError_t e = cudaStreamEndCapture(ctx->stream, &g->graph); e != cudaSuccess)
    return abandon(report(e, "cudaStreamEndCapture(ctx->stream, &g->graph)", __FILE__, __LINE__, sink));
  if (const cudaError_t e = cudaGraphInstantiate(&g->exec, g->graph, 0); e != cudaSuccess)
    return abandon(report(e, "cudaGraphInstantiate(&g->exec, g->graph, 0)", __FILE__, __LINE__, sink));
  *graph = g;
  return PL_CUDA_OK;
}

PlCudaStatus graph_launch(PlCudaContext* ctx, PlCudaGraph* graph, char* message, std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "graph_launch");
  PL_CUDA_TRY(refuse_in_capture(ctx, "graph_launch", sink));
  if (!graph || !graph->exec) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "graph_launch: graph is null");
  PL_CUDA_CHECK(sink, cudaGraphLaunch(graph->exec, ctx->stream));
  return PL_CUDA_OK;
}

PlCudaStatus graph_destroy(PlCudaContext* ctx, PlCudaGraph* graph, char* message, std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "graph_destroy");
  PL_CUDA_TRY(refuse_in_capture(ctx, "graph_destroy", sink));
  if (!graph) return PL_CUDA_OK;
  // Replays still queued read the graph's memory.
  const cudaError_t waited = cudaStreamSynchronize(ctx->stream);
  if (graph->exec) cudaGraphExecDestroy(graph->exec);
  if (graph->graph) cudaGraphDestroy(graph->graph);
  for (void* p : graph->keep) cudaFree(p);
  delete graph;
  PL_CUDA_CHECK(sink, waited);
  return PL_CUDA_OK;
}

PlCudaStatus record_mark(PlCudaContext* ctx, std::uint64_t* mark, char* message, std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "record_mark");
  PL_CUDA_TRY(refuse_in_capture(ctx, "record_mark", sink));
  if (!mark) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "record_mark: mark is null");
  cudaEvent_t& e = ctx->marks[ctx->next_mark % PL_CUDA_MARKS];
  if (!e) PL_CUDA_CHECK(sink, cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  PL_CUDA_CHECK(sink, cudaEventRecord(e, ctx->stream));
  *mark = ctx->next_mark++;
  return PL_CUDA_OK;
}

PlCudaStatus wait_mark(PlCudaContext* ctx, std::uint64_t mark, char* message, std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "wait_mark");
  PL_CUDA_TRY(refuse_in_capture(ctx, "wait_mark", sink));
  if (mark >= ctx->next_mark) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "wait_mark: mark %llu was not recorded",
                                          static_cast<unsigned long long>(mark));
  // The ring has reused an older mark's event: wait for everything.
  if (ctx->next_mark - mark > PL_CUDA_MARKS) {
    PL_CUDA_CHECK(sink, cudaStreamSynchronize(ctx->stream));
  } else {
    PL_CUDA_CHECK(sink, cudaEventSynchronize(ctx->marks[mark % PL_CUDA_MARKS]));
  }
  // An error of the work before the mark (a kernel fault) is sticky: report it.
  PL_CUDA_CHECK(sink, cudaGetLastError());
  return PL_CUDA_OK;
}

}  // namespace pl_cuda
