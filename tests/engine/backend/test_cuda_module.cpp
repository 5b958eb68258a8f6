// CUDA module: the loader and its table checks (always: the module built
// here, fake modules, missing files), the device conversion rules compiled
// for the host against the scalar reference (always), and the module's
// memory and convert entries on a device against the CPU casts (GPU only,
// else skipped with the loader's reason).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/fp_convert.cuh"
#include "backend/cuda_module.h"
#include "numeric/block.h"
#include "numeric/cast.h"
#include "numeric/convert.h"

namespace {

using engine::CastOptions;
using engine::CudaContext;
using engine::CudaResult;
using engine::CudaStatus;
using engine::Format;

std::uint32_t bits(float x) { return std::bit_cast<std::uint32_t>(x); }
float from_bits(std::uint32_t u) { return std::bit_cast<float>(u); }

// Test inputs for encodes: half uniform 32-bit patterns (every exponent,
// inf and NaN payloads included), half log-uniform magnitudes across the
// ranges where FP16/BF16/FP8 round, overflow and go subnormal.
std::vector<float> random_inputs(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> log2_mag(-30.0f, 20.0f);
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (i % 2 == 0) {
      v[i] = from_bits(static_cast<std::uint32_t>(rng()));
    } else {
      const float x = std::exp2(log2_mag(rng));
      v[i] = (rng() & 1u) ? -x : x;
    }
  }
  return v;
}

// Every encoding's own value and its FP32 neighbours, and the midpoints to
// the next encoding and theirs: the inputs where RNE ties and binade,
// subnormal and overflow edges are decided.
std::vector<float> edge_inputs() {
  std::vector<float> v;
  auto add_around = [&v](float x) {
    if (std::isnan(x)) return;
    v.push_back(x);
    v.push_back(std::nextafter(x, INFINITY));
    v.push_back(std::nextafter(x, -INFINITY));
  };
  for (std::uint32_t h = 0; h < 0x10000u; ++h) {
    const float a = engine::fp16_to_fp32(static_cast<std::uint16_t>(h));
    const float b = engine::fp16_to_fp32(static_cast<std::uint16_t>(h + 1));
    add_around(a);
    if (std::isfinite(a) && std::isfinite(b) && ((h + 1) & 0x7fffu) != 0) add_around(a + (b - a) / 2);
    const float c = engine::bf16_to_fp32(static_cast<std::uint16_t>(h));
    const float d = engine::bf16_to_fp32(static_cast<std::uint16_t>(h + 1));
    add_around(c);
    // BF16 midpoints are exactly representable in FP32: c's bits + 0x8000.
    if (std::isfinite(c) && std::isfinite(d) && ((h + 1) & 0x7fffu) != 0)
      add_around(from_bits(bits(c) + 0x8000u));
  }
  for (float x : {448.0f, 464.0f, 480.0f, 57344.0f, 61440.0f, 65504.0f, 65520.0f, 0x1p-9f,
                  0x1p-10f, 0x1p-16f, 0x1p-17f, 0x1p-24f, 0x1p-25f, 0x1p-133f, 0x1p-134f,
                  0x1p-149f, 3.4028235e38f, INFINITY, 0.0f}) {
    add_around(x);
    add_around(-x);
  }
  v.push_back(from_bits(0x7fc00000u));
  v.push_back(from_bits(0xffc00001u));
  v.push_back(from_bits(0x7f800001u));  // signalling NaN
  v.push_back(from_bits(0x7fffffffu));
  v.push_back(from_bits(0x7f801000u));  // signalling NaN whose payload TF32 rounding drops
  return v;
}

::testing::AssertionResult same_bits(const char* what, std::size_t i, float in, std::uint32_t got,
                                     std::uint32_t want) {
  if (got == want) return ::testing::AssertionSuccess();
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s: input #%zu %a (0x%08x): got 0x%x, reference 0x%x", what, i,
                static_cast<double>(in), bits(in), got, want);
  return ::testing::AssertionFailure() << buf;
}

// ---------------------------------------------------------------------------
// Loader: whatever the machine, a status and a reason, never a crash.
// ---------------------------------------------------------------------------

bool one_line(const std::string& s) { return !s.empty() && s.find('\n') == std::string::npos; }

TEST(CudaModuleLoader, MissingFileIsAStatusWithAReason) {
  const engine::CudaModuleInfo info = engine::cuda_probe_module("/nonexistent/dir/libpl_cuda.so");
  EXPECT_FALSE(info.loaded);
  EXPECT_EQ(info.device_count, 0);
  EXPECT_NE(info.reason.find("not found"), std::string::npos) << info.reason;
  EXPECT_TRUE(one_line(info.reason)) << info.reason;
}

TEST(CudaModuleLoader, FileThatIsNotALibraryIsRefusedWithAReason) {
  const std::filesystem::path p =
      std::filesystem::temp_directory_path() / "pl_test_not_a_module.so";
  { std::ofstream(p) << "this is not an ELF file\n"; }
  const engine::CudaModuleInfo info = engine::cuda_probe_module(p.string());
  std::filesystem::remove(p);
  EXPECT_FALSE(info.loaded);
  EXPECT_NE(info.reason.find("cannot load"), std::string::npos) << info.reason;
  EXPECT_TRUE(one_line(info.reason)) << "reason must be one line: " << info.reason;
}

// The fake modules (fake_cuda_module.cpp): refused with a reason that says
// what is wrong, or, for a conforming one without devices, loaded.
TEST(CudaModuleLoader, AnAbi1ModuleIsRefusedNamingItsVersion) {
  const engine::CudaModuleInfo info = engine::cuda_probe_module(PL_TEST_FAKE_MODULE_ABI1);
  EXPECT_FALSE(info.loaded);
  EXPECT_NE(info.reason.find("has ABI 1, this build needs " + std::to_string(PL_CUDA_ABI_VERSION)),
            std::string::npos)
      << info.reason;
  EXPECT_TRUE(one_line(info.reason)) << info.reason;
}

TEST(CudaModuleLoader, ATableOfAnotherVersionIsRefused) {
  const engine::CudaModuleInfo info = engine::cuda_probe_module(PL_TEST_FAKE_MODULE_NEWER);
  EXPECT_FALSE(info.loaded);
  EXPECT_NE(info.reason.find("has ABI " + std::to_string(PL_CUDA_ABI_VERSION + 1) + ", this build needs " +
                             std::to_string(PL_CUDA_ABI_VERSION)),
            std::string::npos)
      << info.reason;
  EXPECT_TRUE(one_line(info.reason)) << info.reason;
}

TEST(CudaModuleLoader, ASmallerTableIsRefused) {
  const engine::CudaModuleInfo info = engine::cuda_probe_module(PL_TEST_FAKE_MODULE_SHORT);
  EXPECT_FALSE(info.loaded);
  EXPECT_NE(info.reason.find("function table of " + std::to_string(offsetof(PlCudaBackendTable, gemm)) +
                             " bytes, this build needs " + std::to_string(sizeof(PlCudaBackendTable))),
            std::string::npos)
      << info.reason;
  EXPECT_TRUE(one_line(info.reason)) << info.reason;
}

TEST(CudaModuleLoader, ATableWithoutTheModulesOwnEntriesIsRefused) {
  const engine::CudaModuleInfo info = engine::cuda_probe_module(PL_TEST_FAKE_MODULE_NO_ENTRIES);
  EXPECT_FALSE(info.loaded);
  EXPECT_NE(info.reason.find("lacks"), std::string::npos) << info.reason;
  EXPECT_TRUE(one_line(info.reason)) << info.reason;
}

TEST(CudaModuleLoader, AConformingModuleWithoutDevicesLoadsAndSaysSo) {
  const engine::CudaModuleInfo info = engine::cuda_probe_module(PL_TEST_FAKE_MODULE_NO_DEVICE);
  EXPECT_TRUE(info.loaded) << info.reason;
  EXPECT_EQ(info.device_count, 0);
  EXPECT_EQ(info.reason, "no CUDA device: fake module: 0 devices");
}

TEST(CudaModuleLoader, ProcessWideStateIsConsistent) {
  const engine::CudaModuleInfo& info = engine::cuda_module_info();
  EXPECT_EQ(engine::cuda_table() != nullptr, info.loaded);
  if (engine::cuda_available()) {
    EXPECT_TRUE(info.loaded);
    EXPECT_GT(info.device_count, 0);
    EXPECT_TRUE(engine::cuda_unavailable_reason().empty());
    return;
  }
  const std::string& reason = engine::cuda_unavailable_reason();
  EXPECT_TRUE(one_line(reason)) << reason;
  EXPECT_EQ(info.device_count, 0);
#if defined(PL_TEST_CUDA_MODULE_BUILT)
  // The module was built with this test: the loader must find it in the
  // build tree, and what is missing can only be the device (or driver).
  // (Unless PL_CUDA_MODULE points the loader elsewhere on purpose.)
  if (std::getenv("PL_CUDA_MODULE")) return;
  EXPECT_TRUE(info.loaded) << reason;
  EXPECT_EQ(reason.rfind("no CUDA device: ", 0), 0u) << reason;
  EXPECT_NE(info.path.find("libpl_cuda"), std::string::npos) << info.path;
#endif
}

TEST(CudaModuleLoader, CallsWithoutDeviceReturnStatusNotCrash) {
  if (engine::cuda_available()) GTEST_SKIP() << "a CUDA device is present";
  int count = -1;
  const CudaResult r = engine::cuda_device_count(count);
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(r.status == CudaStatus::NotLoaded || r.status == CudaStatus::NoDevice)
      << engine::cuda_status_name(r.status);
  EXPECT_TRUE(one_line(r.message)) << r.message;
  EXPECT_EQ(count, 0);

  engine::CudaDeviceInfo dev;
  EXPECT_FALSE(engine::cuda_device_info(0, dev).ok());

  std::unique_ptr<CudaContext> ctx;
  const CudaResult c = CudaContext::create(0, ctx);
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(ctx, nullptr);
  EXPECT_TRUE(one_line(c.message)) << c.message;
  if (!engine::cuda_module_info().loaded) {
    EXPECT_EQ(c.status, CudaStatus::NotLoaded);
  }
}

// ---------------------------------------------------------------------------
// The table: this build's version and layout, and which entries the module
// implements (run wherever the module loads, device or not).
// ---------------------------------------------------------------------------

// The ABI's numbers are part of it: they never follow engine::Format.
static_assert(PL_CUDA_FP16 == 1 && PL_CUDA_BF16 == 2 && PL_CUDA_E4M3 == 3 && PL_CUDA_E5M2 == 4 &&
              PL_CUDA_FP32 == 5 && PL_CUDA_TF32 == 6);
static_assert(offsetof(PlCudaBackendTable, abi_version) == 0 &&
              offsetof(PlCudaBackendTable, table_size) == 4);
// The CUDA Backend hands its engine::BlockQuantized to the module as is.
static_assert(sizeof(PlCudaBlockQuantized) == sizeof(engine::BlockQuantized) &&
              offsetof(PlCudaBlockQuantized, tensor_decode) ==
                  offsetof(engine::BlockQuantized, tensor_decode) &&
              offsetof(PlCudaBlockQuantized, bf16_exact) == offsetof(engine::BlockQuantized, bf16_exact));

TEST(CudaModuleTable, FormatsMapOneToOne) {
  for (Format f : engine::kAllFormats) {
    PlCudaFormat c{};
    EXPECT_TRUE(engine::cuda_format(f, c)) << engine::format_name(f);
  }
  PlCudaFormat c{};
  ASSERT_TRUE(engine::cuda_format(Format::FP32, c));
  EXPECT_EQ(c, PL_CUDA_FP32);
  ASSERT_TRUE(engine::cuda_format(Format::TF32, c));
  EXPECT_EQ(c, PL_CUDA_TF32);
  ASSERT_TRUE(engine::cuda_format(Format::E4M3, c));
  EXPECT_EQ(c, PL_CUDA_E4M3);
  for (Format f : engine::kElementFormats) EXPECT_FALSE(engine::cuda_format(f, c)) << engine::format_name(f);
  for (Format f : engine::kBlockFormats) EXPECT_FALSE(engine::cuda_format(f, c)) << engine::format_name(f);
}

TEST(CudaModuleTable, HasThisBuildsVersionAndSize) {
  const PlCudaBackendTable* t = engine::cuda_table();
  if (!t) GTEST_SKIP() << "module not loaded: " << engine::cuda_unavailable_reason();
  EXPECT_EQ(t->abi_version, static_cast<std::uint32_t>(PL_CUDA_ABI_VERSION));
  EXPECT_EQ(t->table_size, sizeof(PlCudaBackendTable));
}

TEST(CudaModuleTable, ImplementsDevicesContextsMemoryAndConvert) {
  const PlCudaBackendTable* t = engine::cuda_table();
  if (!t) GTEST_SKIP() << "module not loaded: " << engine::cuda_unavailable_reason();
  EXPECT_NE(t->device_count, nullptr);
  EXPECT_NE(t->device_properties, nullptr);
  EXPECT_NE(t->create_context, nullptr);
  EXPECT_NE(t->destroy_context, nullptr);
  EXPECT_NE(t->synchronize, nullptr);
  EXPECT_NE(t->memory_info, nullptr);
  EXPECT_NE(t->allocate, nullptr);
  EXPECT_NE(t->release, nullptr);
  EXPECT_NE(t->upload, nullptr);
  EXPECT_NE(t->download, nullptr);
  EXPECT_NE(t->copy, nullptr);
  EXPECT_NE(t->fill_zero, nullptr);
  EXPECT_NE(t->convert, nullptr);
}

// Every op the CUDA Backend calls is implemented: a NULL entry would make
// make_cuda_backend refuse the module ("lacks the training op ...").
TEST(CudaModuleTable, ImplementsEveryBackendOp) {
  const PlCudaBackendTable* t = engine::cuda_table();
  if (!t) GTEST_SKIP() << "module not loaded: " << engine::cuda_unavailable_reason();
  const void* const ops[] = {
      reinterpret_cast<const void*>(t->gemm),
      reinterpret_cast<const void*>(t->conv2d_forward),
      reinterpret_cast<const void*>(t->conv2d_backward_data),
      reinterpret_cast<const void*>(t->conv2d_backward_weights),
      reinterpret_cast<const void*>(t->maxpool2d_forward),
      reinterpret_cast<const void*>(t->maxpool2d_backward),
      reinterpret_cast<const void*>(t->relu_forward),
      reinterpret_cast<const void*>(t->relu_backward),
      reinterpret_cast<const void*>(t->gelu_forward),
      reinterpret_cast<const void*>(t->gelu_backward),
      reinterpret_cast<const void*>(t->add),
      reinterpret_cast<const void*>(t->scale),
      reinterpret_cast<const void*>(t->fill),
      reinterpret_cast<const void*>(t->quantize),
      reinterpret_cast<const void*>(t->count_nonfinite),
      reinterpret_cast<const void*>(t->amax),
      reinterpret_cast<const void*>(t->column_sums),
      reinterpret_cast<const void*>(t->error_sums),
      reinterpret_cast<const void*>(t->layernorm_forward),
      reinterpret_cast<const void*>(t->layernorm_backward),
      reinterpret_cast<const void*>(t->softmax_forward),
      reinterpret_cast<const void*>(t->softmax_backward),
      reinterpret_cast<const void*>(t->cross_entropy_forward),
      reinterpret_cast<const void*>(t->cross_entropy_backward),
      reinterpret_cast<const void*>(t->mse_forward),
      reinterpret_cast<const void*>(t->mse_backward),
      reinterpret_cast<const void*>(t->unscale_grads),
      reinterpret_cast<const void*>(t->sgd_update),
      reinterpret_cast<const void*>(t->adam_update),
      reinterpret_cast<const void*>(t->scale_amax),
      reinterpret_cast<const void*>(t->block_quantize),
      reinterpret_cast<const void*>(t->gradient_census),
      reinterpret_cast<const void*>(t->relu16_forward),
      reinterpret_cast<const void*>(t->relu16_backward),
      reinterpret_cast<const void*>(t->repeat_rows),
      reinterpret_cast<const void*>(t->patchify),
      reinterpret_cast<const void*>(t->unpatchify),
      reinterpret_cast<const void*>(t->bias_add_channels),
      reinterpret_cast<const void*>(t->channel_sums),
      reinterpret_cast<const void*>(t->conv2d_block),
      reinterpret_cast<const void*>(t->embedding),
      reinterpret_cast<const void*>(t->z_loss),
      // ABI 6 (gpufuse): fused casts.
      reinterpret_cast<const void*>(t->gemm_encode),
      reinterpret_cast<const void*>(t->scale_amax_encode),
      reinterpret_cast<const void*>(t->column_sums16),
      reinterpret_cast<const void*>(t->pointwise_coded),
      // ABI 6 (gpupeer): memory the device reports.
      reinterpret_cast<const void*>(t->memory_allocated),
      // ABI 6 (gpustep): the step on the device.
      reinterpret_cast<const void*>(t->update_scale),
      reinterpret_cast<const void*>(t->set_step_state),
      reinterpret_cast<const void*>(t->capture_begin),
      reinterpret_cast<const void*>(t->capture_end),
      reinterpret_cast<const void*>(t->graph_launch),
      reinterpret_cast<const void*>(t->graph_destroy),
      reinterpret_cast<const void*>(t->host_allocate),
      reinterpret_cast<const void*>(t->host_release),
      reinterpret_cast<const void*>(t->download_async),
      reinterpret_cast<const void*>(t->record_mark),
      reinterpret_cast<const void*>(t->wait_mark),
  };
  // Every op of the table is listed: the last one ends the table.
  static_assert(offsetof(PlCudaBackendTable, wait_mark) + sizeof(void*) == sizeof(PlCudaBackendTable));
  static_assert((sizeof(PlCudaBackendTable) - offsetof(PlCudaBackendTable, gemm)) / sizeof(void*) ==
                sizeof ops / sizeof ops[0]);
  for (std::size_t i = 0; i < sizeof ops / sizeof ops[0]; ++i) EXPECT_NE(ops[i], nullptr) << "op #" << i;
}

// The step entries (ABI 6) check their context first too: one line naming
// the entry, on a machine without a device.
TEST(CudaModuleTable, StepEntriesRefuseANullContextWithTheirName) {
  const PlCudaBackendTable* t = engine::cuda_table();
  if (!t) GTEST_SKIP() << "module not loaded: " << engine::cuda_unavailable_reason();
  char message[256] = "stale";
  std::int64_t count = 0;
  PlCudaScaleState state{};
  EXPECT_EQ(t->update_scale(nullptr, &count, 1, PL_CUDA_SCALE_DYNAMIC, 2.0, 0.5, 2000, &state, message, sizeof message),
            PL_CUDA_INVALID_ARGUMENT);
  EXPECT_STREQ(message, "update_scale: context is null");
  EXPECT_EQ(t->capture_begin(nullptr, message, sizeof message), PL_CUDA_INVALID_ARGUMENT);
  EXPECT_STREQ(message, "capture_begin: context is null");
  PlCudaGraph* graph = nullptr;
  EXPECT_EQ(t->capture_end(nullptr, &graph, message, sizeof message), PL_CUDA_INVALID_ARGUMENT);
  EXPECT_STREQ(message, "capture_end: context is null");
  EXPECT_EQ(t->download_async(nullptr, &count, &count, 8, message, sizeof message), PL_CUDA_INVALID_ARGUMENT);
  EXPECT_STREQ(message, "download_async: context is null");
  std::uint64_t mark = 0;
  EXPECT_EQ(t->record_mark(nullptr, &mark, message, sizeof message), PL_CUDA_INVALID_ARGUMENT);
  EXPECT_STREQ(message, "record_mark: context is null");
}

// The training ops check their context before any CUDA call, so this runs
// (and must hold) on a machine without a device: one line naming the op.
TEST(CudaModuleTable, TrainingOpsRefuseANullContextWithTheirName) {
  const PlCudaBackendTable* t = engine::cuda_table();
  if (!t) GTEST_SKIP() << "module not loaded: " << engine::cuda_unavailable_reason();
  char message[256] = "stale";
  float f = 0.0f;
  EXPECT_EQ(t->gemm(nullptr, 1, 1, 1, &f, PL_CUDA_FP32, 0, 1, nullptr, &f, PL_CUDA_FP32, 0, 1, nullptr, &f, 1, 1.0f,
                    0.0f, nullptr, PL_CUDA_FP32, nullptr, message, sizeof message),
            PL_CUDA_INVALID_ARGUMENT);
  EXPECT_STREQ(message, "gemm: context is null");
  const PlCudaConvShape shape{1, 1, 4, 4, 1, 3, 3, 1, 1};
  EXPECT_EQ(t->conv2d_forward(nullptr, &shape, PL_CUDA_FP32, &f, &f, nullptr, &f, message, sizeof message),
            PL_CUDA_INVALID_ARGUMENT);
  EXPECT_STREQ(message, "conv2d_forward: context is null");
  EXPECT_EQ(t->conv2d_block(nullptr, 0, &shape, &f, nullptr, &f, nullptr, nullptr, &f, message, sizeof message),
            PL_CUDA_INVALID_ARGUMENT);
  EXPECT_STREQ(message, "conv2d_block: context is null");
  EXPECT_EQ(t->relu_forward(nullptr, &f, &f, 1, message, sizeof message), PL_CUDA_INVALID_ARGUMENT);
  EXPECT_STREQ(message, "relu_forward: context is null");
  EXPECT_EQ(t->layernorm_forward(nullptr, &f, &f, &f, &f, &f, &f, 1, 1, 1e-5f, PL_CUDA_FP32, message, sizeof message),
            PL_CUDA_INVALID_ARGUMENT);
  EXPECT_STREQ(message, "layernorm_forward: context is null");
  EXPECT_EQ(t->maxpool2d_forward(nullptr, 1, 1, 2, 2, 2, &f, &f, nullptr, message, sizeof message),
            PL_CUDA_INVALID_ARGUMENT);
  EXPECT_STREQ(message, "maxpool2d_forward: context is null");
  EXPECT_EQ(t->sgd_update(nullptr, &f, &f, nullptr, 1, 0.1f, 0.0f, 1.0f, 0.0f, 0, 0, PL_CUDA_FP32, message,
                          sizeof message),
            PL_CUDA_INVALID_ARGUMENT);
  EXPECT_STREQ(message, "sgd_update: context is null");
  EXPECT_EQ(t->block_quantize(nullptr, PL_CUDA_MXFP8, &f, &f, 1, 1, PL_CUDA_BLOCK_ROWS, 0, 0, nullptr, message,
                              sizeof message),
            PL_CUDA_INVALID_ARGUMENT);
  EXPECT_STREQ(message, "block_quantize: context is null");
}

// ABI 6 (gpufuse): the fused-cast entries of the real module check their
// context first too (runs without a device).
TEST(CudaModuleTable, FusedCastEntriesRefuseANullContextWithTheirName) {
  const PlCudaBackendTable* t = engine::cuda_table();
  if (!t) GTEST_SKIP() << "module not loaded: " << engine::cuda_unavailable_reason();
  char message[256] = "stale";
  float f = 0.0f;
  EXPECT_EQ(t->gemm_encode(nullptr, 1, 1, 1, &f, PL_CUDA_BF16, 0, 0, &f, PL_CUDA_BF16, 1, 0, &f, 1.0f, nullptr,
                           PL_CUDA_BF16, &f, 0, message, sizeof message),
            PL_CUDA_INVALID_ARGUMENT);
  EXPECT_STREQ(message, "gemm_encode: context is null");
  EXPECT_EQ(t->scale_amax_encode(nullptr, PL_CUDA_FP32, &f, 1, 0, 1.0f, PL_CUDA_E4M3, &f, 0, 0, 0, 0, &f, nullptr,
                                 message, sizeof message),
            PL_CUDA_INVALID_ARGUMENT);
  EXPECT_STREQ(message, "scale_amax_encode: context is null");
  EXPECT_EQ(t->column_sums16(nullptr, PL_CUDA_BF16, &f, 1, 1, &f, message, sizeof message), PL_CUDA_INVALID_ARGUMENT);
  EXPECT_STREQ(message, "column_sums16: context is null");
  EXPECT_EQ(t->pointwise_coded(nullptr, 2, PL_CUDA_BF16, &f, PL_CUDA_BF16, &f, PL_CUDA_BF16, &f, 1, 0, 0, 0, 0,
                               message, sizeof message),
            PL_CUDA_INVALID_ARGUMENT);
  EXPECT_STREQ(message, "pointwise_coded: context is null");
}

TEST(CudaModuleTable, ContextEntriesRefuseANullContext) {
  const PlCudaBackendTable* t = engine::cuda_table();
  if (!t) GTEST_SKIP() << "module not loaded: " << engine::cuda_unavailable_reason();
  char message[256] = "stale";
  void* p = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(t->allocate(nullptr, 16, &p, message, sizeof message), PL_CUDA_INVALID_ARGUMENT);
  EXPECT_STREQ(message, "allocate: context is null");
  EXPECT_EQ(t->synchronize(nullptr, message, sizeof message), PL_CUDA_INVALID_ARGUMENT);
  EXPECT_EQ(t->convert(nullptr, PL_CUDA_FP32, p, PL_CUDA_BF16, p, 1, 0, 0, 0, 0, message, sizeof message),
            PL_CUDA_INVALID_ARGUMENT);
  EXPECT_STREQ(message, "convert: context is null");
  // No message buffer at all is allowed.
  EXPECT_EQ(t->download(nullptr, p, p, 1, nullptr, 0), PL_CUDA_INVALID_ARGUMENT);
  // Destroying no context is a no-op.
  EXPECT_EQ(t->destroy_context(nullptr, message, sizeof message), PL_CUDA_OK);
  EXPECT_STREQ(message, "");
}

// ---------------------------------------------------------------------------
// The kernels' conversion functions (fp_convert.cuh), compiled for the host.
// ---------------------------------------------------------------------------

TEST(CudaConversionRules, DecodeEvery16BitPatternLikeTheReference) {
  for (std::uint32_t h = 0; h < 0x10000u; ++h) {
    const auto v = static_cast<std::uint16_t>(h);
    ASSERT_EQ(bits(pl_cuda::fp16_to_fp32(v)), bits(engine::fp16_to_fp32(v))) << "fp16 0x" << std::hex << h;
    ASSERT_EQ(bits(pl_cuda::bf16_to_fp32(v)), bits(engine::bf16_to_fp32(v))) << "bf16 0x" << std::hex << h;
  }
}

TEST(CudaConversionRules, DecodeEveryFp8PatternLikeTheReference) {
  for (std::uint32_t b = 0; b < 0x100u; ++b) {
    const auto v = static_cast<std::uint8_t>(b);
    ASSERT_EQ(bits(pl_cuda::e4m3_to_fp32(v)), bits(engine::e4m3_to_fp32(v))) << "e4m3 0x" << std::hex << b;
    ASSERT_EQ(bits(pl_cuda::e5m2_to_fp32(v)), bits(engine::e5m2_to_fp32(v))) << "e5m2 0x" << std::hex << b;
  }
}

void expect_encodes_like_reference(const std::vector<float>& in) {
  for (std::size_t i = 0; i < in.size(); ++i) {
    const float x = in[i];
    ASSERT_TRUE(same_bits("fp16", i, x, pl_cuda::fp32_to_fp16(x), engine::fp32_to_fp16(x)));
    ASSERT_TRUE(same_bits("bf16", i, x, pl_cuda::fp32_to_bf16(x), engine::fp32_to_bf16(x)));
    ASSERT_TRUE(same_bits("tf32", i, x, bits(pl_cuda::fp32_round_tf32(x)), bits(engine::round_to_tf32(x))));
    for (bool sat : {false, true}) {
      ASSERT_TRUE(same_bits(sat ? "e4m3 sat" : "e4m3", i, x, pl_cuda::fp32_to_e4m3(x, sat),
                            engine::fp32_to_e4m3(x, sat)));
      ASSERT_TRUE(same_bits(sat ? "e5m2 sat" : "e5m2", i, x, pl_cuda::fp32_to_e5m2(x, sat),
                            engine::fp32_to_e5m2(x, sat)));
    }
  }
}

TEST(CudaConversionRules, EncodeEdgesLikeTheReference) { expect_encodes_like_reference(edge_inputs()); }

TEST(CudaConversionRules, EncodeRandomValuesLikeTheReference) {
  expect_encodes_like_reference(random_inputs(2'000'000, 20240601u));
}

TEST(CudaConversionRules, RandomBitsAreTheEnginesStochasticBits) {
  for (std::uint64_t seed : {0ull, 1ull, 42ull, 0xffffffffffffffffull}) {
    const std::uint64_t key = pl_cuda::stream_key(seed);
    for (std::uint64_t i : {0ull, 1ull, 2ull, 1000ull, 1ull << 40, 0xfffffffffffffff0ull})
      ASSERT_EQ(pl_cuda::random_at(key, i), engine::stochastic_bits(seed, i)) << seed << " " << i;
  }
}

// Stochastic rounding with random bits that hit the extremes (0: never
// up; all ones: up whenever anything is dropped) and uniform ones.
void expect_stochastic_like_reference(const std::vector<float>& in, std::uint32_t seed) {
  std::mt19937 rng(seed);
  for (std::size_t i = 0; i < in.size(); ++i) {
    const float x = in[i];
    for (std::uint32_t r : {0u, 0xffffffffu, 0x1000u, static_cast<std::uint32_t>(rng())}) {
      ASSERT_TRUE(same_bits("fp16 sr", i, x, pl_cuda::fp32_to_fp16_sr(x, r), engine::fp32_to_fp16_sr(x, r)));
      ASSERT_TRUE(same_bits("bf16 sr", i, x, pl_cuda::fp32_to_bf16_sr(x, r), engine::fp32_to_bf16_sr(x, r)));
      ASSERT_TRUE(same_bits("tf32 sr", i, x, bits(pl_cuda::fp32_round_tf32_sr(x, r)),
                            engine::encode_sr(Format::TF32, x, r)));
      for (bool sat : {false, true}) {
        ASSERT_TRUE(same_bits("e4m3 sr", i, x, pl_cuda::fp32_to_e4m3_sr(x, r, sat),
                              engine::fp32_to_e4m3_sr(x, r, sat)));
        ASSERT_TRUE(same_bits("e5m2 sr", i, x, pl_cuda::fp32_to_e5m2_sr(x, r, sat),
                              engine::fp32_to_e5m2_sr(x, r, sat)));
      }
    }
  }
}

TEST(CudaConversionRules, StochasticEdgesLikeTheReference) {
  expect_stochastic_like_reference(edge_inputs(), 5u);
}

TEST(CudaConversionRules, StochasticRandomValuesLikeTheReference) {
  expect_stochastic_like_reference(random_inputs(500'000, 99u), 6u);
}

// ---------------------------------------------------------------------------
// On the device (skipped without one, with the loader's reason).
// ---------------------------------------------------------------------------

// The CPU backend's convert (backend/cpu), from numeric/cast.h: decode
// exactly, round once; a narrow format to itself (no options) and FP32 to
// itself copy; TF32 destinations round in place after the decode.
std::vector<std::uint8_t> reference_convert(Format from, const void* src, Format to, std::size_t n,
                                            const CastOptions& opt) {
  std::vector<std::uint8_t> out(n * engine::storage_bytes(to));
  const bool narrow = from != Format::FP32 && from != Format::TF32;
  if (from == to && (from == Format::FP32 || (narrow && !opt.saturate && !opt.stochastic))) {
    std::memcpy(out.data(), src, out.size());
    return out;
  }
  std::vector<float> x(n);
  engine::cast_to_f32(from, src, x.data(), n);
  if (to == Format::FP32) {
    std::memcpy(out.data(), x.data(), out.size());
  } else if (to == Format::TF32) {
    engine::quantize_inplace(Format::TF32, x.data(), n, opt);
    std::memcpy(out.data(), x.data(), out.size());
  } else {
    engine::cast_from_f32(to, x.data(), out.data(), n, opt);
  }
  return out;
}

// What a failing element looks like: index, input bits, got, want.
std::string first_difference(const std::vector<std::uint8_t>& got, const std::vector<std::uint8_t>& want,
                             std::size_t width, const void* src, std::size_t src_width) {
  for (std::size_t i = 0; i * width < got.size(); ++i) {
    if (std::memcmp(got.data() + i * width, want.data() + i * width, width) == 0) continue;
    std::uint32_t g = 0, w = 0, in = 0;
    std::memcpy(&g, got.data() + i * width, width);
    std::memcpy(&w, want.data() + i * width, width);
    std::memcpy(&in, static_cast<const std::uint8_t*>(src) + i * src_width, src_width);
    char buf[128];
    std::snprintf(buf, sizeof buf, "element %zu: input 0x%x, got 0x%x, reference 0x%x", i, in, g, w);
    return buf;
  }
  return {};
}

class CudaDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!engine::cuda_available()) GTEST_SKIP() << engine::cuda_unavailable_reason();
    const CudaResult r = CudaContext::create(0, m_ctx);
    ASSERT_TRUE(r.ok()) << r.message;
    ASSERT_NE(m_ctx, nullptr);
  }
  void TearDown() override {
    for (void* p : m_buffers) EXPECT_TRUE(m_ctx->release(p).ok());
    m_buffers.clear();
    if (m_ctx) {
      const CudaResult r = m_ctx->synchronize();
      EXPECT_TRUE(r.ok()) << r.message;
    }
    m_ctx.reset();
  }

  // A device buffer released at the end of the test.
  void* device_buffer(std::size_t bytes) {
    void* p = nullptr;
    const CudaResult r = m_ctx->allocate(bytes, &p);
    EXPECT_TRUE(r.ok()) << r.message;
    if (p) m_buffers.push_back(p);
    return p;
  }

  // Uploads n elements of `from`, converts on the device (in place when
  // asked: then the buffer is the source's), downloads, and compares with
  // the CPU's convert byte for byte.
  void expect_convert_like_cpu(Format from, const void* host_src, Format to, std::size_t n,
                               const CastOptions& opt = {}, bool in_place = false) {
    const std::size_t in_bytes = n * engine::storage_bytes(from), out_bytes = n * engine::storage_bytes(to);
    void* d_src = device_buffer(in_bytes);
    void* d_dst = in_place ? d_src : device_buffer(out_bytes);
    ASSERT_TRUE(d_src && d_dst);
    ASSERT_TRUE(m_ctx->upload(d_src, host_src, in_bytes).ok());
    const CudaResult r = m_ctx->convert(from, d_src, to, d_dst, n, opt);
    ASSERT_TRUE(r.ok()) << r.message;
    std::vector<std::uint8_t> got(out_bytes);
    const CudaResult d = m_ctx->download(got.data(), d_dst, out_bytes);
    ASSERT_TRUE(d.ok()) << d.message;
    const std::vector<std::uint8_t> want = reference_convert(from, host_src, to, n, opt);
    ASSERT_EQ(got.size(), want.size());
    const std::string diff =
        first_difference(got, want, engine::storage_bytes(to), host_src, engine::storage_bytes(from));
    EXPECT_TRUE(diff.empty()) << engine::format_name(from) << " -> " << engine::format_name(to)
                              << (opt.saturate ? " saturating" : "") << (opt.stochastic ? " stochastic" : "")
                              << (in_place ? " in place" : "") << ": " << diff;
  }

  std::unique_ptr<CudaContext> m_ctx;
  std::vector<void*> m_buffers;
};

TEST_F(CudaDevice, PropertiesAreSane) {
  int count = 0;
  ASSERT_TRUE(engine::cuda_device_count(count).ok());
  ASSERT_GT(count, 0);
  engine::CudaDeviceInfo info;
  const CudaResult r = engine::cuda_device_info(0, info);
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_FALSE(info.name.empty());
  EXPECT_GE(info.compute_major, 5);
  EXPECT_GT(info.sm_count, 0);
  EXPECT_GT(info.memory_total, 0u);
  EXPECT_LE(info.memory_free, info.memory_total);
  const std::uint64_t memory_total = info.memory_total;

  engine::CudaDeviceInfo none;  // a refused query leaves no partial answer to read
  const CudaResult bad = engine::cuda_device_info(count, none);
  EXPECT_EQ(bad.status, CudaStatus::InvalidArgument);
  EXPECT_TRUE(one_line(bad.message)) << bad.message;

  std::uint64_t free_bytes = 0, total_bytes = 0;
  const CudaResult m = m_ctx->memory_info(free_bytes, total_bytes);
  ASSERT_TRUE(m.ok()) << m.message;
  EXPECT_EQ(total_bytes, memory_total);
  EXPECT_LE(free_bytes, total_bytes);
}

TEST_F(CudaDevice, AContextOnAMissingDeviceIsAStatus) {
  std::unique_ptr<CudaContext> other;
  const CudaResult r = CudaContext::create(1 << 20, other);
  EXPECT_EQ(r.status, CudaStatus::InvalidArgument);
  EXPECT_EQ(other, nullptr);
  EXPECT_TRUE(one_line(r.message)) << r.message;
}

TEST_F(CudaDevice, MemoryRoundTrips) {
  // Alignment of every allocation, odd sizes included; 0 bytes is null.
  for (std::size_t bytes : {1u, 3u, 255u, 256u, 257u, 4096u, 1000003u}) {
    void* p = device_buffer(bytes);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 256, 0u) << bytes;
  }
  void* none = reinterpret_cast<void*>(0x1);
  ASSERT_TRUE(m_ctx->allocate(0, &none).ok());
  EXPECT_EQ(none, nullptr);
  EXPECT_TRUE(m_ctx->release(nullptr).ok());

  const std::size_t n = 1'000'003;
  std::vector<std::uint8_t> host(n);
  for (std::size_t i = 0; i < n; ++i) host[i] = static_cast<std::uint8_t>(i * 131u + 7u);
  void* a = device_buffer(n);
  void* b = device_buffer(n);
  ASSERT_TRUE(m_ctx->upload(a, host.data(), n).ok());
  ASSERT_TRUE(m_ctx->copy(b, a, n).ok());
  // Zero a range in the middle of the copy only.
  ASSERT_TRUE(m_ctx->fill_zero(static_cast<std::uint8_t*>(b) + 1000, 5000).ok());
  std::vector<std::uint8_t> back(n, 0xee);
  const CudaResult r = m_ctx->download(back.data(), b, n);
  ASSERT_TRUE(r.ok()) << r.message;
  for (std::size_t i = 0; i < n; ++i)
    ASSERT_EQ(back[i], (i >= 1000 && i < 6000) ? 0 : host[i]) << i;
  ASSERT_TRUE(m_ctx->download(back.data(), a, n).ok());
  EXPECT_EQ(back, host);
}

TEST_F(CudaDevice, ConvertRefusesBadArguments) {
  const PlCudaBackendTable* t = engine::cuda_table();
  void* a = device_buffer(1024);
  char message[256] = {};
  EXPECT_EQ(t->convert(m_ctx->handle(), static_cast<PlCudaFormat>(99), a, PL_CUDA_FP32,
                       static_cast<std::uint8_t*>(a) + 512, 4, 0, 0, 0, 0, message, sizeof message),
            PL_CUDA_INVALID_ARGUMENT);
  EXPECT_STREQ(message, "convert: unknown format 99");
  EXPECT_EQ(t->convert(m_ctx->handle(), PL_CUDA_FP32, a, PL_CUDA_BF16, a, -1, 0, 0, 0, 0, message,
                       sizeof message),
            PL_CUDA_INVALID_ARGUMENT);
  // Overlap of different widths (in place needs one width).
  EXPECT_EQ(t->convert(m_ctx->handle(), PL_CUDA_FP32, a, PL_CUDA_BF16, static_cast<std::uint8_t*>(a) + 4, 16,
                       0, 0, 0, 0, message, sizeof message),
            PL_CUDA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(message).find("overlap"), std::string::npos) << message;
  // Through the wrapper: formats without a storage format.
  const CudaResult r = m_ctx->convert(Format::FP32, a, Format::MXFP8, a, 4);
  EXPECT_EQ(r.status, CudaStatus::InvalidArgument);
  EXPECT_TRUE(one_line(r.message)) << r.message;
  EXPECT_TRUE(m_ctx->synchronize().ok());
}

TEST_F(CudaDevice, Decode16BitPatternsLikeTheCpu) {
  std::vector<std::uint16_t> all(0x10000);
  for (std::uint32_t h = 0; h < 0x10000u; ++h) all[h] = static_cast<std::uint16_t>(h);
  for (Format from : {Format::FP16, Format::BF16})
    for (Format to : engine::kAllFormats) expect_convert_like_cpu(from, all.data(), to, all.size());
}

TEST_F(CudaDevice, DecodeFp8PatternsLikeTheCpu) {
  std::vector<std::uint8_t> all(0x100);
  for (std::uint32_t b = 0; b < 0x100u; ++b) all[b] = static_cast<std::uint8_t>(b);
  for (Format from : {Format::E4M3, Format::E5M2})
    for (Format to : engine::kAllFormats)
      for (bool sat : {false, true}) {
        CastOptions opt;
        opt.saturate = sat;
        expect_convert_like_cpu(from, all.data(), to, all.size(), opt);
      }
}

// 10M random values plus every edge input, to every format, saturating
// and not.
TEST_F(CudaDevice, EncodeLikeTheCpu) {
  std::vector<float> in = random_inputs(10'000'000, 7u);
  const std::vector<float> edges = edge_inputs();
  in.insert(in.end(), edges.begin(), edges.end());
  for (Format to : engine::kAllFormats)
    for (bool sat : {false, true}) {
      CastOptions opt;
      opt.saturate = sat;
      expect_convert_like_cpu(Format::FP32, in.data(), to, in.size(), opt);
    }
}

// TF32 rounding in place of the f32 values, and back (TF32 -> FP32 copies).
TEST_F(CudaDevice, Tf32RoundsInPlace) {
  std::vector<float> in = random_inputs(1'000'000, 8u);
  const std::vector<float> edges = edge_inputs();
  in.insert(in.end(), edges.begin(), edges.end());
  expect_convert_like_cpu(Format::FP32, in.data(), Format::TF32, in.size(), {}, true);
  expect_convert_like_cpu(Format::TF32, in.data(), Format::TF32, in.size(), {}, true);
  expect_convert_like_cpu(Format::TF32, in.data(), Format::FP32, in.size(), {}, true);
}

// Stochastic rounding: the random bits of element i are stochastic_bits(
// seed, index_offset + i), as on the CPU, so a tensor cast in chunks
// rounds as one cast would.
TEST_F(CudaDevice, StochasticRoundingLikeTheCpu) {
  std::vector<float> in = random_inputs(2'000'000, 9u);
  const std::vector<float> edges = edge_inputs();
  in.insert(in.end(), edges.begin(), edges.end());
  for (Format to : engine::kAllFormats)
    for (bool sat : {false, true}) {
      CastOptions opt;
      opt.saturate = sat;
      opt.stochastic = true;
      opt.seed = 1234;
      opt.index_offset = 1'000'000'007ull;
      expect_convert_like_cpu(Format::FP32, in.data(), to, in.size(), opt);
    }
  CastOptions opt;
  opt.stochastic = true;
  opt.seed = 77;
  expect_convert_like_cpu(Format::FP32, in.data(), Format::TF32, in.size(), opt, true);
}

// Between two narrow formats: decoded exactly, rounded once; a format to
// itself copies (or, with options, re-encodes).
TEST_F(CudaDevice, NarrowToNarrowLikeTheCpu) {
  std::vector<std::uint16_t> all16(0x10000);
  for (std::uint32_t h = 0; h < 0x10000u; ++h) all16[h] = static_cast<std::uint16_t>(h);
  std::vector<std::uint8_t> all8(0x100);
  for (std::uint32_t b = 0; b < 0x100u; ++b) all8[b] = static_cast<std::uint8_t>(b);
  const Format narrow[] = {Format::FP16, Format::BF16, Format::E4M3, Format::E5M2};
  for (Format from : narrow) {
    const void* src = engine::storage_bytes(from) == 2 ? static_cast<const void*>(all16.data()) : all8.data();
    const std::size_t n = engine::storage_bytes(from) == 2 ? all16.size() : all8.size();
    for (Format to : narrow)
      for (bool sat : {false, true})
        for (bool sr : {false, true}) {
          CastOptions opt;
          opt.saturate = sat;
          opt.stochastic = sr;
          opt.seed = 5;
          expect_convert_like_cpu(from, src, to, n, opt);
          if (engine::storage_bytes(from) == engine::storage_bytes(to))
            expect_convert_like_cpu(from, src, to, n, opt, true);
        }
  }
}

// More elements than one grid covers (65536 blocks x 256 threads): the
// grid-stride loop's second pass.
TEST_F(CudaDevice, ConvertLongerThanOneGrid) {
  const std::size_t n = (std::size_t{1} << 24) + 4099;
  std::vector<float> in(n);
  for (std::size_t i = 0; i < n; ++i) in[i] = static_cast<float>(i % 70000) * 0.25f - 8000.0f;
  expect_convert_like_cpu(Format::FP32, in.data(), Format::BF16, n);
  std::vector<std::uint16_t> codes(n);
  engine::cast_from_f32(Format::BF16, in.data(), codes.data(), n);
  expect_convert_like_cpu(Format::BF16, codes.data(), Format::FP32, n);
}

}  // namespace
