// precision-lab-cli formats: the table of number formats, or one value in
// every format with its bits.
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "cli/commands.h"
#include "numeric/block.h"
#include "numeric/convert.h"
#include "numeric/format.h"
#include "numeric/inspect.h"

namespace cli {

namespace {

using engine::Format;

constexpr const char* kUsage =
    "usage: precision-lab-cli formats [--value X]\n"
    "  without options: a table of every format's properties\n"
    "  --value X        X (decimal, inf, nan; read as FP32 first, as the engine's tensors are)\n"
    "                   rounded to every format (round-to-nearest-even), with its bits\n";

int bad_input(const std::string& message) {
  std::fprintf(stderr, "precision-lab-cli formats: %s\n", message.c_str());
  return 2;
}

std::string sci(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

// "1.17549e-38 (2^-126)" for an exact power of two.
std::string pow2_text(double v) {
  int e = 0;
  const double frac = std::frexp(v, &e);
  std::string s = sci(v);
  if (frac == 0.5) s += " (2^" + std::to_string(e - 1) + ")";
  return s;
}

// Reads X as FP32 (correctly rounded from the decimal text). Accepts a
// leading '+', "inf"/"infinity"/"nan" in any case, and values beyond FP32's
// range (which become +-inf or +-0 as a cast from a wider type would).
struct ParsedValue {
  float value = 0.0f;
  bool out_of_range = false;  // X was finite and nonzero but beyond FP32's range
};

std::optional<ParsedValue> parse_value(std::string_view text) {
  std::string_view t = text;
  bool negative = false;
  if (!t.empty() && (t.front() == '+' || t.front() == '-')) {
    negative = t.front() == '-';
    t.remove_prefix(1);
  }
  if (t.empty() || t.front() == '+' || t.front() == '-') return std::nullopt;
  float v = 0.0f;
  const char* end = t.data() + t.size();
  auto res = std::from_chars(t.data(), end, v);
  if (res.ptr != end) return std::nullopt;
  if (res.ec == std::errc::result_out_of_range) {
    // Beyond FP32's range: larger than its largest value -> inf, smaller
    // than half its smallest subnormal -> 0, as a cast from double does.
    double d = 0.0;
    const auto res_d = std::from_chars(t.data(), end, d);
    bool huge = false;
    if (res_d.ec == std::errc()) {
      huge = std::fabs(d) > 1.0;
    } else {  // beyond double's range too: decide by the decimal exponent
      const auto e = t.find_first_of("eE");
      const bool negative_exp = e != std::string_view::npos && e + 1 < t.size() && t[e + 1] == '-';
      huge = !negative_exp && t.front() != '0' && t.front() != '.';
    }
    return ParsedValue{negative ? -(huge ? INFINITY : 0.0f) : (huge ? INFINITY : 0.0f), true};
  } else if (res.ec != std::errc()) {
    return std::nullopt;
  }
  return ParsedValue{negative ? -v : v, false};
}

// The special values column: inf, NaN and what overflow does.
const char* specials(Format f) {
  const engine::FormatInfo& i = engine::format_info(f);
  if (i.has_inf) return "yes";
  if (f == Format::E4M3) return "no (NaN = S.1111.111)";
  if (f == Format::E8M0) return "no (0xFF = NaN; no zero, no sign)";
  return "no, no NaN (saturates)";
}

void print_row(Format f) {
  const engine::FormatInfo& i = engine::format_info(f);
  std::printf("%-9s %4d %3d %3d %4d %5d  %-12s  %-21s  %-21s  %-19s  %s\n", i.name, i.bits, i.exp_bits, i.man_bits,
              i.bias, i.storage_bytes, sci(i.max).c_str(), pow2_text(i.min_normal).c_str(),
              f == Format::E8M0 ? "-" : pow2_text(i.min_subnormal).c_str(), pow2_text(i.epsilon).c_str(),
              specials(f));
}

void print_table() {
  std::printf("%-9s %4s %3s %3s %4s %5s  %-12s  %-21s  %-21s  %-19s  %s\n", "format", "bits", "exp",
              "man", "bias", "bytes", "max", "min normal", "min subnormal", "epsilon", "inf");
  for (Format f : engine::kAllFormats) print_row(f);
  for (Format f : engine::kElementFormats) print_row(f);
  std::printf("\nTF32 is a compute format: 19 significant bits kept in a 32-bit container.\n"
              "Rounding is round-to-nearest-even; FP8-E4M3 overflows to NaN (or 448 when saturating).\n"
              "FP6, FP4 and E8M0 are the element and scale formats of the block formats (one code per byte\n"
              "here; a device packs them).\n\n");
  std::printf("%-11s %-9s %-9s %5s  %s\n", "block", "element", "scale", "block", "bits/element");
  for (Format f : engine::kBlockFormats) {
    const engine::BlockInfo& b = engine::block_info(f);
    std::printf("%-11s %-9s %-9s %5d  %.2f%s\n", engine::format_name(f), engine::format_name(b.element),
                engine::format_name(b.scale), b.block, b.bits_per_element,
                b.tensor_scale ? " + an FP32 scale per tensor" : "");
  }
  std::printf("\nMX (OCP Microscaling v1.0): a block's scale is 2^(floor(log2 amax) - emax of the element).\n"
              "NVFP4: an E4M3 scale per 16 values times one FP32 scale per tensor; weights in 16x16 tiles.\n");
}

void print_value(const ParsedValue& parsed) {
  const float x = parsed.value;
  std::vector<Format> formats(std::begin(engine::kAllFormats), std::end(engine::kAllFormats));
  formats.insert(formats.end(), std::begin(engine::kElementFormats), std::end(engine::kElementFormats));
  for (Format f : formats) {
    engine::Inspection i = engine::inspect(f, x);
    if (parsed.out_of_range) {
      // X itself was finite and nonzero; FP32 already overflowed or underflowed it.
      i.overflowed = !std::isfinite(i.value);
      i.underflowed = i.value == 0.0;
    }
    std::printf("%-9s %-16s %-10s %-35s %s\n", engine::format_name(f),
                engine::shortest_decimal(static_cast<float>(i.value)).c_str(), engine::hex_bits(f, i.bits).c_str(),
                engine::binary_fields(f, i.field_bits).c_str(), engine::class_text(i).c_str());
  }
}

}  // namespace

int cmd_formats(int argc, char** argv) {
  std::optional<ParsedValue> value;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    std::string_view text;
    if (arg == "--value") {
      if (i + 1 >= argc) return bad_input("--value needs a number");
      text = argv[++i];
    } else if (arg.substr(0, 8) == "--value=") {
      text = arg.substr(8);
      if (text.empty()) return bad_input("--value needs a number");
    } else {
      return bad_input("unknown option '" + std::string(arg) + "' (usage: formats [--value X])");
    }
    if (value) return bad_input("--value given twice");
    value = parse_value(text);
    if (!value) return bad_input("--value: '" + std::string(text) + "' is not a number");
  }
  if (value) print_value(*value);
  else print_table();
  return 0;
}

}  // namespace cli
