// Fuzz target: the run-config parser (--config files, presets' settings).
#include <cstdint>
#include <stdexcept>
#include <string>

#include "train/run_config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const engine::RunConfig c = engine::parse_run_config(text, "fuzz.json");
    // What parses must round-trip: config.json is written from it.
    (void)engine::parse_run_config(engine::to_json(c), "roundtrip");
  } catch (const std::runtime_error&) {
    // Refused with a message: fine.
  }
  return 0;
}
