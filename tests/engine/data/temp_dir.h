// Test helper: a fresh temporary directory removed at scope exit, and raw file writing.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace test {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "pl-data-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    m_path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(m_path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (m_path / name).string(); }
  std::string path() const { return m_path.string(); }

 private:
  std::filesystem::path m_path;
};

inline void write_bytes(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

inline std::vector<std::uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// An unsigned-byte IDX image built by hand (independent of write_idx).
inline std::vector<std::uint8_t> idx_bytes(const std::vector<std::uint32_t>& dims,
                                           const std::vector<std::uint8_t>& payload,
                                           std::uint8_t type = 0x08) {
  std::vector<std::uint8_t> b{0, 0, type, static_cast<std::uint8_t>(dims.size())};
  for (std::uint32_t d : dims) {
    b.push_back(std::uint8_t(d >> 24));
    b.push_back(std::uint8_t(d >> 16));
    b.push_back(std::uint8_t(d >> 8));
    b.push_back(std::uint8_t(d));
  }
  b.insert(b.end(), payload.begin(), payload.end());
  return b;
}

}  // namespace test
