// The initial weights and batch order of a run folder: written whole (a temporary folder renamed), read back checked.
#include "journal/initial_state.h"

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "journal/npy.h"

namespace engine {

namespace fs = std::filesystem;

std::string initial_state_dir_name(int run_id) { return "initial-" + std::to_string(run_id); }

namespace {

// A parameter's file: its name with characters outside [A-Za-z0-9._-] as '_'.
std::string file_of(const std::string& name) {
  std::string f = name;
  for (char& c : f)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') c = '_';
  return f + ".npy";
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error(p.string() + ": missing (the run folder keeps no initial state for this run)");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

void write_initial_state(const std::string& dir, int run_id, const WeightsFile& weights, std::size_t samples,
                         std::size_t batch, std::uint64_t seed, std::int64_t steps, const std::string& note) {
  const fs::path final_dir = fs::path(dir) / initial_state_dir_name(run_id);
  std::string tmp_name = ".";
  tmp_name += initial_state_dir_name(run_id);
  tmp_name += ".tmp";
  const fs::path tmp = fs::path(dir) / tmp_name;
  std::error_code ec;
  fs::remove_all(tmp, ec);
  if (!fs::create_directories(tmp, ec) && ec)
    throw std::runtime_error(tmp.string() + ": cannot create (" + ec.message() + ")");
  std::string names = "# The parameters of run " + std::to_string(run_id) +
                      " before its first step, in the optimizer's order; each NAME's values are NAME.npy "
                      "(float32, the lab's shape).\n";
  for (const StoredParameter& p : weights.parameters) {
    names += p.name + "\n";
    write_file_synced((tmp / file_of(p.name)).string(), serialize_npy(npy_f32(p.shape, p.values)));
  }
  write_file_synced((tmp / "parameters.txt").string(), names);
  std::string order;
  order.reserve(static_cast<std::size_t>(steps) * batch * 6 + 256);
  order += "# Run " + std::to_string(run_id) + ": one line per step, the training split's sample indices (0-based) "
           "of that step's batch, in order. " + std::to_string(samples) + " samples, batch " + std::to_string(batch) +
           ", seed " + std::to_string(seed) + ", " + std::to_string(steps) + " steps. " + note + "\n";
  for_each_batch(samples, batch, seed, steps, [&](std::int64_t, std::span<const std::uint32_t> idx) {
    for (std::size_t k = 0; k < idx.size(); ++k) {
      if (k) order += ' ';
      order += std::to_string(idx[k]);
    }
    order += '\n';
  });
  write_file_synced((tmp / "batches.txt").string(), order);
  fs::remove_all(final_dir, ec);
  fs::rename(tmp, final_dir, ec);
  if (ec) throw std::runtime_error(final_dir.string() + ": cannot write (" + ec.message() + ")");
}

InitialState read_initial_state(const std::string& dir, int run_id, std::size_t samples) {
  const fs::path base = fs::path(dir) / initial_state_dir_name(run_id);
  if (!fs::is_directory(base))
    throw std::runtime_error(base.string() +
                             ": missing: the run folder keeps no initial weights for run " + std::to_string(run_id) +
                             " (run it again with --keep-initial on)");
  InitialState s;
  {
    const fs::path p = base / "parameters.txt";
    std::istringstream in(read_all(p));
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      if (line.find_first_of(" \t\r") != std::string::npos)
        throw std::runtime_error(p.string() + ": malformed line '" + line + "' (one parameter name a line)");
      const fs::path f = base / file_of(line);
      const NpyArray a = parse_npy(read_all(f), f.string());
      if (a.type != NpyType::F32) throw std::runtime_error(f.string() + ": values must be float32 ('<f4')");
      s.names.push_back(line);
      s.shapes.push_back(a.shape);
      std::vector<float> v(static_cast<std::size_t>(a.numel()));
      std::memcpy(v.data(), a.data.data(), a.data.size());
      s.values.push_back(std::move(v));
    }
    if (s.names.empty()) throw std::runtime_error(p.string() + ": names no parameter");
  }
  {
    const fs::path p = base / "batches.txt";
    std::istringstream in(read_all(p));
    std::string line;
    std::int64_t n = 0;
    while (std::getline(in, line)) {
      ++n;
      if (line.empty() || line[0] == '#') continue;
      std::vector<std::uint32_t> b;
      const char* c = line.c_str();
      while (*c) {
        while (*c == ' ') ++c;
        if (!*c) break;
        char* end = nullptr;
        errno = 0;
        const unsigned long long v = std::strtoull(c, &end, 10);
        if (end == c || errno || (*end && *end != ' ') || v >= samples)
          throw std::runtime_error(p.string() + ":" + std::to_string(n) + ": not a sample index below " +
                                   std::to_string(samples));
        b.push_back(static_cast<std::uint32_t>(v));
        c = end;
      }
      if (b.empty()) throw std::runtime_error(p.string() + ":" + std::to_string(n) + ": an empty batch");
      s.batches.push_back(std::move(b));
    }
    if (s.batches.empty()) throw std::runtime_error(p.string() + ": holds no batch");
  }
  return s;
}

}  // namespace engine
