// Fuzz target: the IDX reader on any bytes (through a memfd, as a file).
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "data/idx.h"

namespace {
// Writes `data` to an anonymous file and returns its /proc path.
std::string as_file(const std::uint8_t* data, std::size_t size, int& fd) {
  fd = memfd_create("pl_fuzz", 0);
  if (fd < 0) std::abort();
  for (std::size_t off = 0; off < size;) {
    const ssize_t n = write(fd, data + off, size - off);
    if (n <= 0) std::abort();
    off += static_cast<std::size_t>(n);
  }
  return "/proc/self/fd/" + std::to_string(fd);
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  int fd = -1;
  const std::string path = as_file(data, size, fd);
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
