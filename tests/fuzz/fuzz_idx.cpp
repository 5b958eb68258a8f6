// Fuzz target: the IDX reader on any bytes (through a memfd, as a file).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "data/idx.h"
#include "fuzz/fuzz_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  int fd = -1;
  const std::string path = fuzz::as_file(data, size, fd);
  try {
    const engine::IdxArray a = engine::read_idx(path);
    // What was read must be what the header promised.
    std::size_t n = 1;
    for (auto d : a.dims) n *= d;
    if (n != a.data.size()) std::abort();
  } catch (const std::runtime_error&) {
    // Refused with a message: fine.
  }
  close(fd);
  return 0;
}
