// A CUDA module table made of host functions that forward to the CPU
// backend: the CUDA Backend's own code (engine/backend/cuda_backend.cpp:
// formats, structs, batches and block pointers mapped to the ABI, errors
// mapped back) runs the whole conformance suite on a machine without a GPU.
// What it cannot check is the module behind the table. Its capture entries
// record the calls (with copies of their arguments) instead of running them
// and replay them at each graph launch: a fake stream for the capture logic.
#pragma once

#include <memory>

namespace engine {
class Backend;
}

// A CUDA Backend over the host table (its "device" memory is host memory).
std::unique_ptr<engine::Backend> make_host_table_cuda_backend();
// How often the host table's gemm_encode entry (ABI 6) was called: the
// tests check that the CUDA Backend routes GemmEncodeOp to it.
int host_table_gemm_encode_calls();
// Calls of its scale_amax_encode, column_sums16 and pointwise_coded entries (ABI 6).
int host_table_fused_cast_calls();

// Entries of the host table called so far (all contexts): what a step costs
// the host, a captured one being one graph launch.
long long host_table_calls();
