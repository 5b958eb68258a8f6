// Fuzz target: the weights file reader (journal/weights.h). The input is a
// weights file's bytes; what parses is loaded into a small mlp, whose
// checks (model, names, shapes) then refuse or take it.
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "backend/backend.h"
#include "journal/weights.h"
#include "nn/model.h"
#include "train/build_model.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // The spirals mlp of widths 8, 4: what the seeds in corpus/weights hold.
  static const std::unique_ptr<engine::Backend> be = engine::make_cpu_backend(1);
  static const std::unique_ptr<engine::Model> model = [] {
    engine::RunConfig c;
    c.dataset = "spirals";
    c.widths = {8, 4};
    return engine::build_model(c);
  }();
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    const engine::WeightsFile w = engine::parse_weights(bytes, "fuzz.bin");
    engine::load_weights(*be, *model, w, "fuzz.bin");
  } catch (const std::runtime_error&) {
    // Refused with a message naming the file: fine.
  }
  return 0;
}
