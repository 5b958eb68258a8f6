// The fuzz targets' bytes as a file the readers open by path (a memfd).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace fuzz {

// Writes `data` to an anonymous file; returns its /proc path and sets `fd`
// (close it when done).
inline std::string as_file(const std::uint8_t* data, std::size_t size, int& fd) {
  fd = memfd_create("pl_fuzz", 0);
  if (fd < 0) std::abort();
  for (std::size_t off = 0; off < size;) {
    const ssize_t n = write(fd, data + off, size - off);
    if (n <= 0) std::abort();
    off += static_cast<std::size_t>(n);
  }
  return "/proc/self/fd/" + std::to_string(fd);
}

}  // namespace fuzz
