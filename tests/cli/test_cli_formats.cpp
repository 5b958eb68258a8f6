// Runs `precision-lab-cli formats` as a user would and checks what it prints
// and how it exits (README.md "Command line").
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_runner.h"

namespace {

using cli_test::RunResult;
using cli_test::run_cli;

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// The line that starts with the format's name followed by a blank.
std::string line_for(const std::string& text, const std::string& name) {
  for (const std::string& l : lines(text))
    if (l.rfind(name + " ", 0) == 0) return l;
  return {};
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(CliFormats, ValuePointOneShowsTheKnownBits) {
  const RunResult r = run_cli("formats --value 0.1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  const std::string fp16 = line_for(r.out, "FP16");
  const std::string bf16 = line_for(r.out, "BF16");
  EXPECT_TRUE(contains(fp16, "0x2E66")) << r.out;
  EXPECT_TRUE(contains(fp16, "0|01011|1001100110")) << fp16;
  EXPECT_TRUE(contains(fp16, "0.099975586")) << fp16;
  EXPECT_TRUE(contains(bf16, "0x3DCD")) << r.out;
  EXPECT_TRUE(contains(bf16, "0|01111011|1001101")) << bf16;
  EXPECT_TRUE(contains(line_for(r.out, "FP32"), "0x3DCCCCCD")) << r.out;
  EXPECT_TRUE(contains(line_for(r.out, "TF32"), "0x3DCCC000")) << r.out;
  EXPECT_TRUE(contains(line_for(r.out, "FP8-E5M2"), "0x2E")) << r.out;
  EXPECT_TRUE(contains(line_for(r.out, "FP8-E4M3"), "0x1D")) << r.out;
  EXPECT_TRUE(contains(line_for(r.out, "FP8-E4M3"), "0|0011|101")) << r.out;
  // 0.1 is below half of FP4's smallest subnormal (0.5): zero. FP6-E2M3's
  // smallest subnormal is 0.125, the nearest value. E8M0 takes the nearest
  // power of two: 2^-3 (0.1 is above 1.5 * 2^-4 = 0.09375).
  EXPECT_TRUE(contains(line_for(r.out, "FP4-E2M1"), "zero (underflow)")) << r.out;
  EXPECT_TRUE(contains(line_for(r.out, "FP6-E2M3"), "0x01")) << r.out;
  EXPECT_TRUE(contains(line_for(r.out, "FP6-E3M2"), "0x02")) << r.out;  // 0.125 = 2 * 2^-4
  EXPECT_TRUE(contains(line_for(r.out, "E8M0"), "0x7C")) << r.out;      // 2^-3
  EXPECT_EQ(lines(r.out).size(), 10u) << "one line per tensor and element format:\n" << r.out;
}

TEST(CliFormats, OverflowInfNanAndNegativeValues) {
  const RunResult big = run_cli("formats --value=65520");
  ASSERT_EQ(big.exit_code, 0) << big.err;
  EXPECT_TRUE(contains(line_for(big.out, "FP16"), "0x7C00")) << big.out;
  EXPECT_TRUE(contains(line_for(big.out, "FP16"), "inf")) << big.out;
  EXPECT_TRUE(contains(line_for(big.out, "FP8-E4M3"), "0x7F")) << big.out;

  const RunResult neg = run_cli("formats --value -inf");
  ASSERT_EQ(neg.exit_code, 0) << neg.err;
  EXPECT_TRUE(contains(line_for(neg.out, "FP16"), "0xFC00")) << neg.out;
  EXPECT_TRUE(contains(line_for(neg.out, "FP8-E5M2"), "0xFC")) << neg.out;

  const RunResult nan = run_cli("formats --value nan");
  ASSERT_EQ(nan.exit_code, 0) << nan.err;
  EXPECT_TRUE(contains(line_for(nan.out, "BF16"), "nan")) << nan.out;
  EXPECT_TRUE(contains(line_for(nan.out, "FP8-E4M3"), "0x7F")) << nan.out;

  const RunResult half = run_cli("formats --value -1.5");
  ASSERT_EQ(half.exit_code, 0) << half.err;
  EXPECT_TRUE(contains(line_for(half.out, "FP16"), "-1.5")) << half.out;
  EXPECT_TRUE(contains(line_for(half.out, "FP16"), "0xBE00")) << half.out;
  EXPECT_TRUE(contains(line_for(half.out, "FP16"), "1|01111|1000000000")) << half.out;
}

void expect_bad_input(const std::string& args) {
  const RunResult r = run_cli(args);
  EXPECT_EQ(r.exit_code, 2) << args;
  EXPECT_TRUE(r.out.empty()) << args << ": printed " << r.out;
  const std::vector<std::string> err = lines(r.err);
  ASSERT_EQ(err.size(), 1u) << args << ": stderr was\n" << r.err;
  EXPECT_FALSE(err[0].empty());
}

TEST(CliFormats, BadInputIsOneLineAndExitCodeTwo) {
  expect_bad_input("formats --value abc");
  expect_bad_input("formats --value");
  expect_bad_input("formats --value=");
  expect_bad_input("formats --value 1.5x");
  expect_bad_input("formats --bogus");
  expect_bad_input("formats extra");
  const RunResult r = run_cli("formats --value abc");
  EXPECT_TRUE(contains(r.err, "abc")) << "the error names the bad value: " << r.err;
}

TEST(CliFormats, TableListsEveryFormat) {
  const RunResult r = run_cli("formats");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* name : {"FP32", "TF32", "BF16", "FP16", "FP8-E5M2", "FP8-E4M3"})
    EXPECT_FALSE(line_for(r.out, name).empty()) << name << " missing from\n" << r.out;
  EXPECT_TRUE(contains(line_for(r.out, "FP16"), "65504")) << r.out;
  EXPECT_TRUE(contains(line_for(r.out, "FP8-E4M3"), "448")) << r.out;
  EXPECT_TRUE(contains(line_for(r.out, "FP8-E5M2"), "57344")) << r.out;
  EXPECT_TRUE(contains(line_for(r.out, "BF16"), "2^-133")) << r.out;
}

}  // namespace
