// precision-lab-cli run / compare: train from the command line, write the CSV files.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <cstring>
#include <stdexcept>
#include <string>
#include <set>
#include <thread>
#include <vector>

#include "backend/registry.h"
#include "cli/commands.h"
#include "journal/journal.h"
#include "report/csv.h"
#include "train/comparison.h"
#include "train/model_defaults.h"
#include "train/run.h"
#include "train/trainer.h"

namespace cli {
namespace {

volatile std::sig_atomic_t g_interrupted = 0;
void on_sigint(int) { g_interrupted = 1; }

struct Options {
  engine::RunConfig config;
  std::string out;
  std::vector<std::string> recipes;
};

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == ',') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

// Parses argv (argv[0] is the command name). Throws std::invalid_argument
// with a one-line message for bad input.
Options parse(int argc, char** argv, bool compare) {
  Options o;
  std::string config_path;
  std::vector<std::pair<std::string, std::string>> sets;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0) throw std::invalid_argument("unexpected argument '" + a + "'");
    std::string key = a.substr(2), value;
    if (auto eq = key.find('='); eq != std::string::npos) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
    } else if (key == "qk-norm" && (i + 1 >= argc || std::string(argv[i + 1]).rfind("--", 0) == 0)) {
      value = "true";  // a flag on its own
    } else {
      if (i + 1 >= argc) throw std::invalid_argument("option --" + key + " needs a value");
      value = argv[++i];
    }
    if (key == "config") config_path = value;
    else if (key == "out") o.out = value;
    else if (key == "recipes" && compare) o.recipes = split_list(value);
    else sets.emplace_back(key, value);
  }
  if (!config_path.empty()) o.config = engine::load_run_config(config_path);
  // --size applies once every other option is known (the model it sizes),
  // and what the options name overrides it, wherever it stands.
  std::string size;
  std::set<std::string> named;
  for (const auto& [k, v] : sets) {
    std::string key = k;
    std::replace(key.begin(), key.end(), '-', '_');
    if (key == "size") size = v;
    else named.insert(key);
  }
  for (const auto& [k, v] : sets) {
    if (k == "size") continue;
    try {
      engine::set_config_value(o.config, k, v, "--" + k);
    } catch (const std::runtime_error& e) {
      // set_config_value names the origin; "unknown key" means an unknown option here.
      std::string msg = e.what();
      if (msg.find("unknown key") != std::string::npos) msg = "unknown option --" + k;
      throw std::invalid_argument(msg);
    }
  }
  if (!size.empty()) {
    try {
      engine::apply_size(o.config, size, named, "--size");
    } catch (const std::runtime_error& e) {
      throw std::invalid_argument(e.what());
    }
  }
  // A model named here starts from its own optimizer (the gpt from AdamW,
  // train/model_defaults.h), as the app's setup panel does; what the
  // options name stays, and a config file is taken as it is written.
  if (config_path.empty()) {
    const auto named = [&sets](const char* key) {
      for (const auto& kv : sets)
        if (kv.first == key) return true;
      return false;
    };
    engine::apply_optimizer_defaults(o.config, named("optimizer"), named("lr"));
  }
  // The CLI keeps every run's starting point (initial weights, batch
  // order) for export-pytorch unless told otherwise.
  {
    bool named = false;
    for (const auto& kv : sets) named = named || kv.first == "keep-initial" || kv.first == "keep_initial";
    if (!named && o.config.keep_initial == "auto") o.config.keep_initial = "on";
  }
  if (compare) {
    if (o.recipes.empty()) o.recipes = o.config.compare;
    if (o.recipes.empty()) throw std::invalid_argument("compare needs --recipes r1,r2,...");
    o.config.compare = o.recipes;
  }
  engine::validate(o.config, config_path.empty() ? "options" : config_path);
  if (o.out.empty()) throw std::invalid_argument("--out DIR is required");
  return o;
}

std::string human_time(double s) {
  char buf[32];
  if (s < 0 || s > 1e7) return "--:--";
  const int t = static_cast<int>(s + 0.5);
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%d:%02d:%02d", t / 3600, t / 60 % 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%02d:%02d", t / 60, t % 60);
  return buf;
}

}  // namespace

int train_runs(const std::vector<engine::ComparisonRun>& runs, const std::string& out,
               std::vector<engine::RunExport>& exports, const Replay* replay) {
  engine::Trainer trainer;
  std::vector<std::string> recipes;
  for (const engine::ComparisonRun& r : runs) {
    trainer.add_run(r.config);
    recipes.push_back(r.name);
  }
  if (replay) {
    for (const engine::StampedChange& c : replay->changes) trainer.schedule(c);
    for (std::size_t i = 0; i < replay->stop_at.size(); ++i)
      if (replay->stop_at[i] > 0) trainer.stop_run_at(static_cast<int>(i), replay->stop_at[i]);
  }
  // The run folder is written as the runs go (a kill leaves everything up
  // to the last second, marked interrupted).
  try {
    attach_journal(trainer, out, recipes);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "precision-lab-cli: %s\n", e.what());
    return 2;
  }
  // Which backend trains, and for auto why (one line).
  if (!runs.empty() && runs.front().config.backend != "cpu" && runs.front().config.backend != "guarded")
    std::printf("backend (%s): %s\n", runs.front().config.backend.c_str(),
                engine::describe_backend_choice(runs.front().config.backend).c_str());
  const bool tty = isatty(STDOUT_FILENO) != 0;
  g_interrupted = 0;
  auto prev = std::signal(SIGINT, on_sigint);
  const auto t0 = std::chrono::steady_clock::now();
  trainer.start();

  std::vector<engine::Record> records;
  std::vector<std::int64_t> total(recipes.size(), 0), done(recipes.size(), 0);
  std::vector<double> last_loss(recipes.size(), 0.0);
  std::int64_t samples = 0;
  bool failed = false;
  std::int64_t next_plain = 0;
  bool stopping = false;
  bool first_step_reported = false;
  auto poll = [&] {
    records.clear();
    trainer.drain(records);
    for (const engine::Record& rec : records) {
      if (const auto* m = std::get_if<engine::StepMetrics>(&rec)) {
        done[static_cast<std::size_t>(m->run_id)] = m->step;
        last_loss[static_cast<std::size_t>(m->run_id)] = m->loss;
        samples += static_cast<std::int64_t>(m->samples_per_second * m->wall_ms / 1000.0 + 0.5);
        if (!first_step_reported && !tty) {
          const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          std::printf("first step after %.3f s\n", s);
          first_step_reported = true;
        }
      } else if (const auto* e = std::get_if<engine::EvalMetrics>(&rec)) {
        if (tty) std::printf("\r\033[K");
        if (e->val_accuracy >= 0 && e->per_token)
          std::printf("[%s] step %lld epoch %lld: val_loss %.4f val_accuracy %.4f val_bits_per_token %.4f "
                      "val_perplexity %.3f\n",
                      recipes[static_cast<std::size_t>(e->run_id)].c_str(), static_cast<long long>(e->step),
                      static_cast<long long>(e->epoch), e->val_loss, e->val_accuracy, e->val_bits_per_token(),
                      e->val_perplexity());
        else if (e->val_accuracy >= 0)
          std::printf("[%s] step %lld epoch %lld: val_loss %.4f val_accuracy %.4f\n",
                      recipes[static_cast<std::size_t>(e->run_id)].c_str(), static_cast<long long>(e->step),
                      static_cast<long long>(e->epoch), e->val_loss, e->val_accuracy);
        else
          std::printf("[%s] step %lld epoch %lld: val_loss %.6g\n", recipes[static_cast<std::size_t>(e->run_id)].c_str(),
                      static_cast<long long>(e->step), static_cast<long long>(e->epoch), e->val_loss);
      } else if (const auto* t = std::get_if<engine::TextSample>(&rec)) {
        // What the model writes now, on one line (its line breaks as \n).
        std::string text;
        for (char ch : t->text) text += ch == '\n' ? std::string("\\n") : std::string(1, ch);
        if (tty) std::printf("\r\033[K");
        std::printf("[%s] step %lld writes: %s\n", recipes[static_cast<std::size_t>(t->run_id)].c_str(),
                    static_cast<long long>(t->step), text.c_str());
      } else if (const auto* st = std::get_if<engine::RunStatus>(&rec)) {
        if (st->state == engine::RunState::Failed) {
          std::fprintf(stderr, "precision-lab-cli: run %d (%s) failed: %s\n", st->run_id,
                       recipes[static_cast<std::size_t>(st->run_id)].c_str(), st->message.c_str());
          failed = true;
        }
        if (st->total_steps > 0) total[static_cast<std::size_t>(st->run_id)] = st->total_steps;
      } else if (const auto* ev = std::get_if<engine::Event>(&rec)) {
        if (ev->kind == engine::EventKind::NanLoss) {
          if (tty) std::printf("\r\033[K");
          std::printf("[%s] step %lld: loss is NaN/inf (diverged)\n",
                      recipes[static_cast<std::size_t>(ev->run_id)].c_str(), static_cast<long long>(ev->step));
        }
      }
    }
  };
  std::int64_t all_total = 0;
  for (;;) {
    const bool active = trainer.active();
    poll();
    if (g_interrupted && !stopping) {
      trainer.stop();
      stopping = true;
      std::fprintf(stderr, "\nprecision-lab-cli: interrupted; stopping at the next step boundary\n");
    }
    all_total = 0;
    for (auto t : total) all_total += t;
    std::int64_t all_done = 0;
    for (auto d : done) all_done += d;
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (tty && all_done > 0) {
      const double rate = samples / std::max(el, 1e-9);
      std::string pct = "", eta = "";
      if (all_total > 0) {
        pct = std::to_string(static_cast<int>(100.0 * all_done / all_total)) + "%";
        eta = human_time(el / all_done * (all_total - all_done));
      }
      std::printf("\r\033[Kstep %lld%s%s  %.0f samples/s  loss %.4f  elapsed %s%s%s", static_cast<long long>(all_done),
                  all_total > 0 ? "/" : "", all_total > 0 ? std::to_string(all_total).c_str() : "", rate,
                  last_loss[0], human_time(el).c_str(), eta.empty() ? "" : "  ETA ", eta.c_str());
      std::fflush(stdout);
    } else if (!tty && all_done >= next_plain && all_done > 0) {
      std::printf("step %lld  %.0f samples/s  loss %.4f  elapsed %.1f s\n", static_cast<long long>(all_done),
                  samples / std::max(el, 1e-9), last_loss[0], el);
      std::fflush(stdout);
      next_plain = all_done + 500;
    }
    if (!active) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  trainer.wait();
  poll();
  if (tty) std::printf("\r\033[K");
  std::signal(SIGINT, prev);

  // Runs that failed before their first step (a data set that did not
  // load): the error above is the whole story; the folder holds only what
  // was asked and status.json saying why, no result files.
  bool any_step = false;
  for (auto d : done) any_step = any_step || d > 0;
  if (failed && !any_step) {
    std::fflush(stdout);
    return 1;
  }
  exports.clear();
  for (int i = 0; i < trainer.run_count(); ++i) {
    const engine::Run* r = trainer.run(i);
    if (!r) continue;
    engine::RunExport x;
    x.run_id = i;
    x.name = runs[static_cast<std::size_t>(i)].name;
    x.recipe = r->config().recipe;
    x.config = r->config();
    x.history = r->history();
    x.summary = r->summary();
    exports.push_back(std::move(x));
    const engine::RunSummary& s = exports.back().summary;
    std::printf("%-11s steps %lld  final_loss %.5g  val_accuracy %s  overflow_steps %lld  skipped %lld  "
                "loss_scale %g  peak_mem %.2f MiB  %.0f samples/s\n",
                exports.back().name.c_str(), static_cast<long long>(s.steps), s.final_loss,
                s.val_accuracy >= 0 ? std::to_string(s.val_accuracy).c_str() : "n/a",
                static_cast<long long>(s.overflow_steps), static_cast<long long>(s.skipped_steps),
                s.final_loss_scale, s.peak_memory_bytes / 1048576.0, s.samples_per_second);
  }
  std::printf("wrote %s/{steps,evals,events,grads,summary}.csv, config.json, runs.json, commands.jsonl, status.json%s\n",
              out.c_str(), std::filesystem::exists(std::filesystem::path(out) / "samples.jsonl") ? ", samples.jsonl" : "");
  if (failed) return 1;
  return g_interrupted ? 130 : 0;
}

int cmd_run(int argc, char** argv, bool compare) {
  Options o;
  try {
    o = parse(argc, argv, compare);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "precision-lab-cli %s: %s\n", compare ? "compare" : "run", e.what());
    return 2;
  }
  // A comparison's runs come from the engine's one rule (the app's Compare
  // uses it too): each recipe keeps its own loss-scaling rule.
  std::vector<engine::ComparisonRun> runs;
  if (compare) runs = engine::comparison_runs(o.config, o.recipes);
  else runs.push_back({o.config.recipe, o.config});
  std::vector<engine::RunExport> exports;
  return train_runs(runs, o.out, exports);
}

}  // namespace cli
