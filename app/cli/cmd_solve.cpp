// precision-lab-cli solve: Ax = b by a low-precision LU and iterative refinement, one run per format and method.
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/registry.h"
#include "cli/commands.h"
#include "cli/parse_args.h"
#include "solve/matrix.h"
#include "solve/refine.h"

namespace cli {

namespace {

namespace fs = std::filesystem;

constexpr const char* kUsage =
    "usage: precision-lab-cli solve [--matrix FILE.mtx | --n N --cond K --seed S] [--rhs FILE]\n"
    "                               --factor FMT [--accumulate FMT] [--residual FMT] [--working FMT]\n"
    "                               [--method lu-ir|gmres-ir[,...]] [--max-iter N] [--tol X]\n"
    "                               [--compare FMT,FMT,...] [--storage factor|fp32] [--block N]\n"
    "                               [--gmres fp64|fp32] [--threads N] --out DIR\n"
    "  solves A x = b: an LU in a low precision, refined to FP64 accuracy (docs/solver.md)\n"
    "  --matrix FILE   a real square Matrix Market file (coordinate or array; general, symmetric)\n"
    "  --n N           a random matrix of size N (default 512) with 2-norm condition number\n"
    "  --cond K        K (default 100; singular values 1 .. 1/K, geometric) from seed S (default 0)\n"
    "  --rhs FILE      b, one value a line; without it b = A x for a random x (forward errors known)\n"
    "  --factor FMT    the LU's format: fp64 fp32 tf32 bf16 fp16 fp8-e4m3 fp8-e5m2, or with\n"
    "                  --storage fp32 a block format: mxfp8 mxfp8-e5m2 mxfp6 mxfp6-e3m2 mxfp4 nvfp4\n"
    "  --accumulate    the LU's product accumulation: fp32 (default, as Tensor Cores) or factor\n"
    "                  (the factor's own format; fp16 and bf16 only)\n"
    "  --residual FMT  r = b - A x in fp32, fp64 (default) or fp80 (x87 extended)\n"
    "  --working FMT   x and its update in fp64 (default) or fp32\n"
    "  --method M      lu-ir (default), gmres-ir, or both: lu-ir,gmres-ir\n"
    "  --gmres FMT     GMRES-IR's inner solve in fp64 (default) or fp32 (five-precision GMRES-IR:\n"
    "                  A and the preconditioner in FP32, half the bytes an inner step reads)\n"
    "  --max-iter N    updates at most (default 30)\n"
    "  --tol X         the backward error that counts as converged (default 2^-53)\n"
    "  --compare F,..  more factor formats, each run like --factor's\n"
    "  --storage S     factor (default): the LU held in the factor format; fp32: held in FP32, only\n"
    "                  the trailing update's operands rounded to it (Tensor Core mode, FP16-TC)\n"
    "  --block N       the LU's panel width (default: 64, or 128 from n = 1024)\n"
    "  --threads N     the engine's threads (default 0: every core)\n"
    "writes iterations.csv, summary.csv, solution.csv and config.json into DIR; a run that does not\n"
    "converge is a result (exit 0), bad input exits 2\n";

int fail(const std::string& what) {
  std::fprintf(stderr, "precision-lab-cli solve: %s\n", what.c_str());
  return 2;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

bool parse_arith(const std::string& s, engine::Arith& out) {
  if (s == "fp32" || s == "FP32") out = engine::Arith::FP32;
  else if (s == "fp64" || s == "FP64") out = engine::Arith::FP64;
  else if (s == "fp80" || s == "FP80") out = engine::Arith::FP80;
  else return false;
  return true;
}

// A number a user reads: enough digits to tell 3e-17 from 0.
std::string num(double v) {
  if (std::isnan(v)) return "";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string json_string(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\', o += c;
    else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      o += buf;
    } else o += c;
  }
  return o + "\"";
}

using RunOut = engine::SolveRun;

}  // namespace

void print_solve_header() {
  std::printf("%-18s %-9s %-9s %5s %6s %-10s %-10s %s\n", "run", "scale", "converged", "iter", "gmres", "backward",
              "forward", "reason");
}

void print_solve_row(const engine::SolveRun& r, bool forward_known) {
  const auto& s = r.result;
  char fwd[32] = "-";
  if (forward_known) std::snprintf(fwd, sizeof fwd, "%.3e", s.forward_error);
  std::printf("%-18s %-9s %-9s %5d %6d %-10.3e %-10s %s\n", r.name.c_str(), num(s.scale).c_str(),
              s.converged ? "yes" : "no", s.iterations, s.gmres_iterations, s.backward_error, fwd, s.reason.c_str());
}

std::string solve_iterations_csv(const std::vector<engine::SolveRun>& runs) {
  std::ostringstream it;
  it << "run,factor,method,iteration,backward_error,forward_error,update,gmres_iterations\n";
  for (const RunOut& r : runs) {
    const std::string f = engine::factor_key(r.config.lu.factor), m = engine::method_key(r.config.method);
    for (const auto& h : r.result.history)
      it << r.name << ',' << f << ',' << m << ',' << h.iteration << ',' << num(h.backward_error) << ','
         << num(h.forward_error) << ',' << num(h.update) << ',' << h.gmres_iterations << '\n';
  }
  return it.str();
}

std::string solve_summary_csv(const std::vector<engine::SolveRun>& runs, std::int64_t n, double cond) {
  std::ostringstream sum;
  sum << "run,factor,storage,accumulate,residual,working,method,n,cond,scale,converged,reason,iterations,gmres_iterations,"
         "backward_error,forward_error,factor_seconds,refine_seconds,total_seconds,low_precision_flop_share,gmres\n";
  for (const RunOut& r : runs) {
    const auto& s = r.result;
    const std::string f = engine::factor_key(r.config.lu.factor), m = engine::method_key(r.config.method);
    sum << r.name << ',' << f << ','
        << (r.config.lu.factor.fp64 || r.config.lu.storage == engine::LuConfig::Storage::Factor ? f : "fp32") << ','
        << (r.config.lu.factor.fp64 ? "fp64" : engine::format_key(r.config.lu.accumulate)) << ','
        << engine::arith_key(r.config.residual) << ',' << engine::arith_key(r.config.working) << ',' << m << ','
        << n << ',' << num(cond) << ',' << num(s.scale) << ',' << (s.converged ? "true" : "false") << ",\""
        << s.reason << "\"," << s.iterations << ',' << s.gmres_iterations << ',' << num(s.backward_error) << ','
        << num(s.forward_error) << ',' << num(s.factor_seconds) << ',' << num(s.refine_seconds) << ','
        << num(s.factor_seconds + s.refine_seconds) << ','
        << num(s.flops_total > 0 ? s.flops_low / s.flops_total : 0.0) << ','
        << (r.config.method == engine::Method::GmresIr ? engine::arith_key(r.config.gmres) : "none") << '\n';
  }
  return sum.str();
}

std::string solve_solution_csv(const std::vector<engine::SolveRun>& runs, std::int64_t n,
                               const std::vector<double>& x_true) {
  std::ostringstream sol;
  sol << "i";
  if (!x_true.empty()) sol << ",x_exact";
  for (const RunOut& r : runs) sol << ',' << r.name;
  sol << '\n';
  for (std::int64_t i = 0; i < n; ++i) {
    sol << i;
    if (!x_true.empty()) sol << ',' << exact(x_true[static_cast<std::size_t>(i)]);
    for (const RunOut& r : runs)
      sol << ',' << (r.result.x.empty() ? std::string() : exact(r.result.x[static_cast<std::size_t>(i)]));
    sol << '\n';
  }
  return sol.str();
}

int write_solve_files(const std::string& command, const std::string& out,
                      const std::vector<std::pair<std::string, std::string>>& files) {
  const std::string who = "precision-lab-cli " + command + ": ";
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) {
    std::fprintf(stderr, "%s%s: cannot create the folder: %s\n", who.c_str(), out.c_str(), ec.message().c_str());
    return 2;
  }
  for (const auto& [name, text] : files) {
    const fs::path tmp = fs::path(out) / ("." + name + ".tmp");
    std::ofstream o(tmp, std::ios::binary);
    o << text;
    o.close();
    if (!o) {
      for (const auto& f : files) fs::remove(fs::path(out) / ("." + f.first + ".tmp"), ec);
      std::fprintf(stderr, "%s%s: cannot write\n", who.c_str(), tmp.string().c_str());
      return 1;
    }
  }
  for (const auto& [name, text] : files) {
    (void)text;
    fs::rename(fs::path(out) / ("." + name + ".tmp"), fs::path(out) / name, ec);
    if (ec) {
      std::fprintf(stderr, "%s%s: cannot write: %s\n", who.c_str(), (fs::path(out) / name).string().c_str(),
                   ec.message().c_str());
      return 2;
    }
  }
  return 0;
}

int cmd_solve(int argc, char** argv) {
  std::string matrix_path, rhs_path, out, factor, accumulate = "fp32", residual = "fp64", working = "fp64",
                                              gmres = "fp64", methods = "lu-ir", compare, storage = "factor";
  std::uint64_t n = 512, seed = 0, max_iter = 30, block = 0, threads = 0;
  double cond = 100.0, tol = 0x1p-53;
  bool random_options = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    static const char* const kValued[] = {"--matrix", "--n",      "--cond",     "--seed",    "--rhs",
                                          "--factor", "--accumulate", "--residual", "--working", "--method",
                                          "--max-iter", "--tol",  "--compare",  "--block",   "--threads", "--out",
                                          "--storage", "--gmres"};
    bool known = false;
    for (const char* k : kValued) known = known || a == k;
    if (!known) return fail("unknown option '" + a + "' (try --help)");
    if (i + 1 >= argc) return fail(a + " needs a value");
    const std::string v = argv[++i];
    if (a == "--matrix") matrix_path = v;
    else if (a == "--rhs") rhs_path = v;
    else if (a == "--out") out = v;
    else if (a == "--factor") factor = v;
    else if (a == "--accumulate") accumulate = v;
    else if (a == "--residual") residual = v;
    else if (a == "--working") working = v;
    else if (a == "--gmres") gmres = v;
    else if (a == "--method") methods = v;
    else if (a == "--compare") compare = v;
    else if (a == "--storage") storage = v;
    else if (a == "--n") {
      random_options = true;
      if (!parse_count(v, static_cast<std::uint64_t>(engine::kMaxSolveN), n) || n == 0)
        return fail("--n must be a whole number in 1.." + std::to_string(engine::kMaxSolveN) + " (got '" + v + "')");
    } else if (a == "--cond") {
      random_options = true;
      if (!parse_number(v, cond) || cond < 1.0) return fail("--cond must be a number >= 1 (got '" + v + "')");
    } else if (a == "--seed") {
      random_options = true;
      if (!parse_count(v, UINT64_MAX, seed)) return fail("--seed must be a whole number >= 0 (got '" + v + "')");
    } else if (a == "--max-iter") {
      if (!parse_count(v, 10000, max_iter)) return fail("--max-iter must be a whole number in 0..10000 (got '" + v + "')");
    } else if (a == "--tol") {
      if (!parse_number(v, tol) || tol < 0.0) return fail("--tol must be a number >= 0 (got '" + v + "')");
    } else if (a == "--block") {
      if (!parse_count(v, 4096, block) || block == 0) return fail("--block must be a whole number in 1..4096 (got '" + v + "')");
    } else if (a == "--threads") {
      if (!parse_count(v, 1024, threads)) return fail("--threads must be a whole number >= 0 (got '" + v + "')");
    }
  }
  if (out.empty()) return fail("--out DIR is required");
  if (factor.empty()) return fail("--factor FMT is required (fp64 fp32 tf32 bf16 fp16 fp8-e4m3 fp8-e5m2)");
  if (!matrix_path.empty() && random_options) return fail("--matrix and --n/--cond/--seed exclude each other");

  // Every setting checked before anything is computed or written.
  std::vector<engine::SolveFormat> formats;
  for (const std::string& f : [&] {
         std::vector<std::string> all{factor};
         for (const auto& c : split(compare)) all.push_back(c);
         return all;
       }()) {
    const auto sf = engine::parse_factor_format(f);
    if (!sf)
      return fail("unknown factor format '" + f + "' (fp64 fp32 tf32 bf16 fp16 fp8-e4m3 fp8-e5m2; mxfp8 mxfp6 mxfp4 nvfp4 "
                  "with --storage fp32)");
    bool seen = false;
    for (const auto& g : formats) seen = seen || g == *sf;
    if (!seen) formats.push_back(*sf);
  }
  std::vector<engine::Method> method_list;
  for (const auto& m : split(methods)) {
    if (m == "lu-ir") method_list.push_back(engine::Method::LuIr);
    else if (m == "gmres-ir") method_list.push_back(engine::Method::GmresIr);
    else return fail("--method must be lu-ir or gmres-ir (got '" + m + "')");
  }
  if (method_list.empty()) return fail("--method must be lu-ir or gmres-ir");
  engine::RefineConfig base;
  if (!parse_arith(residual, base.residual)) return fail("--residual must be fp32, fp64 or fp80 (got '" + residual + "')");
  if (!parse_arith(working, base.working) || base.working == engine::Arith::FP80)
    return fail("--working must be fp32 or fp64 (got '" + working + "')");
  if (!parse_arith(gmres, base.gmres) || base.gmres == engine::Arith::FP80)
    return fail("--gmres must be fp32 or fp64 (got '" + gmres + "')");
  std::optional<engine::Format> acc;
  if (accumulate != "factor") {
    acc = engine::parse_format(accumulate);
    if (!acc) return fail("--accumulate must be fp32, fp16, bf16 or factor (got '" + accumulate + "')");
  }
  if (storage == "fp32") base.lu.storage = engine::LuConfig::Storage::FP32;
  else if (storage != "factor") return fail("--storage must be factor or fp32 (got '" + storage + "')");
  base.max_iter = static_cast<int>(max_iter);
  base.tol = tol;
  base.lu.block = static_cast<std::int64_t>(block);
  std::vector<RunOut> runs;
  for (const auto& f : formats)
    for (engine::Method m : method_list) {
      RunOut r;
      r.config = base;
      r.config.method = m;
      r.config.lu.factor = f;
      r.config.lu.accumulate = acc ? *acc : (f.fp64 ? engine::Format::FP32 : f.format);
      if (!acc && !f.fp64 && !engine::is_half_format(f.format)) r.config.lu.accumulate = engine::Format::FP32;
      const std::string problem = engine::refine_config_problem(r.config);
      if (!problem.empty()) return fail(problem);
      r.name = engine::factor_key(f) + (storage == "fp32" && !f.fp64 ? "-tc-" : "-") + engine::method_key(m) +
               (m == engine::Method::GmresIr && base.gmres == engine::Arith::FP32 ? "-fp32" : "");
      runs.push_back(std::move(r));
    }

  engine::Matrix a;
  std::vector<double> b, x_true;
  std::string source;
  try {
    if (!matrix_path.empty()) {
      a = engine::read_matrix_market(matrix_path);
      source = matrix_path;
    } else {
      a = engine::random_matrix(static_cast<std::int64_t>(n), cond, seed);
      source = "random";
    }
    if (!rhs_path.empty()) {
      b = engine::read_vector(rhs_path, a.n);
    } else {
      x_true = engine::random_vector(a.n, seed + 1);
      b.resize(static_cast<std::size_t>(a.n));
      engine::matvec(a, x_true.data(), b.data());
    }
  } catch (const std::exception& e) {
    return fail(e.what());
  }

  engine::BackendChoice be = engine::make_backend("cpu", static_cast<int>(threads));
  const engine::BackendInfo info = be.backend->info();
  std::printf("solve: n = %lld, %s%s; %s\n", static_cast<long long>(a.n),
              matrix_path.empty() ? ("random, cond " + num(cond) + ", seed " + std::to_string(seed)).c_str()
                                  : matrix_path.c_str(),
              rhs_path.empty() ? ", b = A x for a random x" : (", b from " + rhs_path).c_str(),
              info.native_bf16 ? "native bf16 GEMM" : "bf16 GEMM decoded to f32");
  print_solve_header();
  engine::SolveWorkspace ws;  // the compared runs share one set of buffers
  for (RunOut& r : runs) {
    r.result = engine::solve_refine(a, b, x_true.empty() ? nullptr : &x_true, r.config, be.backend.get(), &ws);
    print_solve_row(r, !x_true.empty());
  }

  // The four files: written beside their final names, then renamed, so a
  // failed write leaves nothing half-written.
  std::ostringstream cfg;
  cfg << "{\n  \"command\": \"solve\",\n  \"matrix\": " << json_string(source) << ",\n  \"n\": " << a.n;
  if (matrix_path.empty()) cfg << ",\n  \"cond\": " << exact(cond) << ",\n  \"seed\": " << seed;
  cfg << ",\n  \"rhs\": " << (rhs_path.empty() ? std::string("\"A x, x random from seed + 1\"") : json_string(rhs_path))
      << ",\n  \"factors\": [";
  for (std::size_t i = 0; i < formats.size(); ++i) cfg << (i ? ", " : "") << json_string(engine::factor_key(formats[i]));
  cfg << "],\n  \"methods\": [";
  for (std::size_t i = 0; i < method_list.size(); ++i)
    cfg << (i ? ", " : "") << json_string(engine::method_key(method_list[i]));
  cfg << "],\n  \"storage\": " << json_string(storage) << ",\n  \"accumulate\": " << json_string(accumulate) << ",\n  \"residual\": " << json_string(residual)
      << ",\n  \"working\": " << json_string(working) << ",\n  \"gmres\": " << json_string(gmres)
      << ",\n  \"max_iter\": " << max_iter
      << ",\n  \"tol\": " << exact(tol) << ",\n  \"block\": " << block << ",\n  \"backend\": "
      << json_string(be.name) << ",\n  \"device\": " << json_string(info.device)
      << ",\n  \"native_bf16\": " << (info.native_bf16 ? "true" : "false") << ",\n  \"threads\": " << info.threads
      << "\n}\n";
  const int written = write_solve_files("solve", out,
                                        {{"iterations.csv", solve_iterations_csv(runs)},
                                         {"summary.csv", solve_summary_csv(runs, a.n, matrix_path.empty() ? cond : std::nan(""))},
                                         {"solution.csv", solve_solution_csv(runs, a.n, x_true)},
                                         {"config.json", cfg.str()}});
  if (written != 0) return written;
  std::printf("wrote %s/{iterations.csv, summary.csv, solution.csv, config.json}\n", out.c_str());
  return 0;
}

}  // namespace cli
