// Fuzz target: the Matrix Market reader of the solver (engine/solve/matrix.h).
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "solve/matrix.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    // Sizes up to 512: a sparse file may name a large n in a few bytes, and
    // the dense matrix is n^2 doubles.
    const engine::Matrix m = engine::parse_matrix_market(text, "fuzz.mtx", 512);
    if (m.n < 1 || m.n > 512 || m.a.size() != static_cast<std::size_t>(m.n * m.n)) std::abort();
    for (double v : m.a)
      if (!std::isfinite(v)) std::abort();
  } catch (const std::runtime_error& e) {
    // One line naming the file.
    const std::string what = e.what();
    if (what.rfind("fuzz.mtx:", 0) != 0 || what.find('\n') != std::string::npos) std::abort();
  }
  return 0;
}
