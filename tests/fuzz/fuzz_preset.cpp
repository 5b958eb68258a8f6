// Fuzz target: the lecture preset parser.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "lecture/preset.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const engine::Preset p = engine::parse_preset(text, "fuzz.json", "fuzz");
    (void)engine::quick_version(p);
  } catch (const std::runtime_error&) {
    // Refused with a message: fine.
  }
  return 0;
}
