// Fuzz target: the journal reader. The input is split at its first NUL byte
// into steps.csv and commands.jsonl of a run folder whose status.json and
// runs.json are valid; events.csv gets the steps part too (other columns).
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "report/csv.h"
#include "journal/journal.h"

namespace fs = std::filesystem;

namespace {
const fs::path& folder() {
  static const fs::path dir = [] {
    const fs::path d = fs::temp_directory_path() / ("pl_fuzz_journal_" + std::to_string(getpid()));
    fs::create_directories(d);
    std::ofstream(d / "status.json") << R"({"status": "finished", "runs": [{"status": "finished", "steps": 3}]})";
    std::ofstream(d / "runs.json") << R"({"runs": [{"name": "fp32", "config": {"dataset": "spirals", "steps": 3}}]})";
    for (engine::CsvFile f : {engine::CsvFile::Evals, engine::CsvFile::Grads, engine::CsvFile::Summary})
      std::ofstream(d / engine::csv_file_name(f)) << engine::csv_header(f);
    return d;
  }();
  return dir;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const auto cut = text.find('\0');
  const fs::path& d = folder();
  std::ofstream(d / "steps.csv", std::ios::binary | std::ios::trunc) << text.substr(0, cut);
  std::ofstream(d / "events.csv", std::ios::binary | std::ios::trunc) << text.substr(0, cut);
  std::ofstream(d / "commands.jsonl", std::ios::binary | std::ios::trunc)
      << (cut == std::string::npos ? std::string() : text.substr(cut + 1));
  try {
    (void)engine::read_journal(d.string());
  } catch (const std::runtime_error&) {
    // Refused with a message naming the file: fine.
  }
  return 0;
}
