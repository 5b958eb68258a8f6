// Fuzz target: the .npy reader (journal/npy.h) that export-pytorch reads the
// initial weights with. The input is a file's bytes; what parses must
// serialize back to a file that parses to the same array.
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "journal/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    const engine::NpyArray a = engine::parse_npy(bytes, "fuzz.npy");
    const engine::NpyArray b = engine::parse_npy(engine::serialize_npy(a), "again.npy");
    if (b.shape != a.shape || b.type != a.type || b.data != a.data) std::abort();
  } catch (const std::runtime_error&) {
    // Refused with a message naming the file: fine.
  }
  return 0;
}
