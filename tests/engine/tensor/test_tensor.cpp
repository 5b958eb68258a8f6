// Tensor: storage in the format's own width, reuse, moves, encode/decode.
#include <gtest/gtest.h>

#include "engine/support/test_backend.h"

#include "tensor/tensor.h"

using engine::Format;
using engine::Tensor;

TEST(Tensor, StoresEachFormatInItsOwnWidth) {
  EXPECT_EQ(Tensor({128, 784}, Format::FP32).bytes(), 128u * 784u * 4u);
  EXPECT_EQ(Tensor({128, 784}, Format::TF32).bytes(), 128u * 784u * 4u);
  EXPECT_EQ(Tensor({128, 784}, Format::FP16).bytes(), 128u * 784u * 2u);
  EXPECT_EQ(Tensor({128, 784}, Format::BF16).bytes(), 128u * 784u * 2u);
  EXPECT_EQ(Tensor({128, 784}, Format::E4M3).bytes(), 128u * 784u);
  EXPECT_EQ(Tensor({128, 784}, Format::E5M2).bytes(), 128u * 784u);
}

TEST(Tensor, ResizeReusesTheAllocation) {
  Tensor t({64, 64}, Format::FP32);
  const void* p = t.data();
  t.resize({32, 64}, Format::FP16);
  EXPECT_EQ(t.data(), p);
  EXPECT_EQ(t.numel(), 32 * 64);
  t.resize({1024, 1024}, Format::FP32);
  EXPECT_GE(t.capacity_bytes(), 1024u * 1024u * 4u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data()) % 64, 0u);
}

TEST(Tensor, MovedFromTensorIsEmptyAndReusable) {
  Tensor a({10}, Format::FP32);
  Tensor b = std::move(a);
  EXPECT_EQ(b.numel(), 10);
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(a.capacity_bytes(), 0u);
  a.resize({4}, Format::FP16);  // must allocate, not write through a null pointer
  a.u16()[3] = 0x3C00;
  Tensor c;
  c = std::move(b);
  EXPECT_TRUE(b.empty());
  b.resize({2}, Format::FP32);
  b.f32()[1] = 1.0f;
  EXPECT_EQ(c.numel(), 10);
}

TEST(Tensor, EncodeDecodeRoundsToNearestEven) {
  const Tensor t = Tensor::from_values({3}, Format::FP16, {0.1f, 65520.0f, -0.0f});
  EXPECT_EQ(t.u16()[0], 0x2E66);
  EXPECT_EQ(t.u16()[1], 0x7C00);  // overflows to inf
  EXPECT_EQ(t.u16()[2], 0x8000);
  const auto v = t.to_f32();
  EXPECT_EQ(v[0], 0.0999755859375f);
  Tensor f32;
  engine::decode_to(test::cpu_backend(), t, f32);
  EXPECT_EQ(f32.format(), Format::FP32);
  EXPECT_EQ(f32.f32()[0], v[0]);
  Tensor e4m3;
  engine::encode_to(test::cpu_backend(), f32, Format::E4M3, e4m3, /*saturate=*/true);
  EXPECT_EQ(e4m3.u8()[1], 0x7E);  // inf saturates to 448
}

TEST(Tensor, RejectsNegativeDimensions) { EXPECT_THROW(Tensor({-1, 3}, Format::FP32), std::invalid_argument); }
