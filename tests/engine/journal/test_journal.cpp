// The run journal (docs/ARCHITECTURE.md "Runs on disk"): the folder a trainer writes as
// it goes equals the export, reads back, survives an interruption, and a
// run with live changes replays bit for bit.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <unistd.h>

#include "engine/train/trainer_test_support.h"
#include "report/csv.h"
#include "journal/journal.h"
#include "train/run.h"

namespace {

using namespace trainer_test;
using namespace engine;
namespace fs = std::filesystem;

fs::path temp(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("pl_journal_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(p);
  return p;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A CSV file with the measured columns blanked (wall time, speed, memory of
// the process): what must be equal between a run and its replay.
std::string deterministic(const fs::path& p) {
  CsvTable t = read_csv(p.string());
  for (const char* measured : {"wall_ms", "samples_per_second", "rss", "wall_seconds"}) {
    const int c = t.column(measured);
    if (c >= 0)
      for (auto& row : t.rows) row[static_cast<std::size_t>(c)].assign(1, '-');  // (not = "-": GCC 12 warns -Wrestrict wrongly)
  }
  std::string out;
  for (const auto& row : t.rows) {
    for (const auto& f : row) {
      out += f;
      out += ',';
    }
    out += '\n';
  }
  return out;
}

std::vector<RunExport> exports_of(const Trainer& t, const std::vector<std::string>& names) {
  std::vector<RunExport> out;
  for (int i = 0; i < t.run_count(); ++i) {
    const Run* r = t.run(i);
    RunExport x;
    x.run_id = i;
    x.name = names[static_cast<std::size_t>(i)];
    x.recipe = r->config().recipe;
    x.config = r->config();
    x.history = r->history();
    x.summary = r->summary();
    out.push_back(std::move(x));
  }
  return out;
}

TEST(Journal, TheFolderWrittenAsItGoesEqualsTheExport) {
  const fs::path dir = temp("equal"), exported = temp("equal_export");
  Trainer t;
  RunConfig a = spirals(60), b = spirals(60);
  a.stats_every = 20;
  b.recipe = "mixed-fp16";
  b.stats_every = 20;
  t.add_run(a);
  t.add_run(b);
  attach_journal(t, dir.string(), {"a, \"first\"", "b"});
  t.start();
  t.wait();
  export_runs(exported.string(), exports_of(t, {"a, \"first\"", "b"}));
  // The journal appends rows as the runs step in turn; the export writes
  // them run after run: the same rows, byte for byte, in that grouping.
  auto by_run = [](const fs::path& p) {
    std::istringstream in(slurp(p));
    std::string header, line;
    std::getline(in, header);
    std::map<std::string, std::string> runs;
    while (std::getline(in, line)) runs[line.substr(0, line.find(','))] += line + "\n";
    std::string out = header + "\n";
    for (const auto& [id, rows] : runs) out += rows;
    return out;
  };
  for (const char* f : {"steps.csv", "evals.csv", "events.csv", "grads.csv", "summary.csv"})
    EXPECT_EQ(by_run(dir / f), slurp(exported / f)) << f;
  EXPECT_EQ(slurp(dir / "config.json"), slurp(exported / "config.json"));
  const JournalContents j = read_journal(dir.string());
  EXPECT_EQ(j.status, "finished");
  EXPECT_FALSE(j.interrupted);
  ASSERT_EQ(j.runs.size(), 2u);
  EXPECT_EQ(j.runs[0].name, "a, \"first\"");
  EXPECT_EQ(j.runs[1].config.recipe, "mixed-fp16");
  EXPECT_EQ(j.runs[1].steps, 60);
  EXPECT_EQ(j.exports[1].history.steps.size(), 60u);
  EXPECT_EQ(j.exports[1].history.steps.back().loss, t.run(1)->steps().back().loss);
  ASSERT_EQ(j.exports[1].history.grads.size(), t.run(1)->grad_stats().size());
  // A reopened run draws its gradient histograms again.
  EXPECT_EQ(j.exports[1].history.grads.back().histogram, t.run(1)->grad_stats().back().histogram);
  EXPECT_EQ(j.exports[1].history.grads.back().log2_lo, t.run(1)->grad_stats().back().log2_lo);
  fs::remove_all(dir);
  fs::remove_all(exported);
}

TEST(Journal, ALiveRunWithChangesReplaysBitForBit) {
  const fs::path dir = temp("live"), again = temp("replay");
  // Long enough that the run is still going when the changes and the stop
  // arrive, however late the test thread gets a core (150 steps of spirals
  // were over before them on a loaded machine).
  RunConfig c = spirals(100000);
  c.recipe = "mixed-fp16";
  c.stats_every = 25;
  c.optimizer = "sgd";
  c.lr = 0.05;
  {
    Trainer t;
    t.add_run(c);
    attach_journal(t, dir.string(), {"live"});
    t.start();
    std::vector<Record> all;
    // Live changes at whatever step they arrive: the journal stamps them.
    ASSERT_TRUE(drain_until(t, all, [](auto& a) { return count_steps(a, 0) >= 20; }));
    t.set_layer_precision(0, "fc2", LayerPrecision{Format::BF16, Format::BF16, Format::FP32, Format::BF16});
    ASSERT_TRUE(drain_until(t, all, [](auto& a) { return count_steps(a, 0) >= 50; }));
    LossScalerConfig s;
    s.mode = ScalingMode::Dynamic;
    s.init_scale = 1024;
    s.growth_interval = 10;
    t.set_loss_scaler(0, s);
    t.inspect_next_step();
    ASSERT_TRUE(drain_until(t, all, [](auto& a) { return count_steps(a, 0) >= 90; }));
    t.stop();  // stopped mid-run: the replay stops there too
    t.wait();
  }
  const JournalContents j = read_journal(dir.string());
  ASSERT_EQ(j.commands.size(), 3u);
  EXPECT_EQ(j.commands[0].change.kind, LiveChange::Kind::LayerPrecision);
  EXPECT_GE(j.commands[0].after_step, 20);
  EXPECT_EQ(j.runs[0].status, "stopped");
  EXPECT_LT(j.runs[0].steps, c.steps);

  Trainer r;
  r.add_run(j.runs[0].config);
  for (const StampedChange& ch : j.commands) r.schedule(ch);
  r.stop_run_at(0, j.runs[0].steps);
  attach_journal(r, again.string(), {"live"});
  r.start();
  r.wait();
  for (const char* f : {"steps.csv", "evals.csv", "events.csv", "grads.csv", "summary.csv"})
    EXPECT_EQ(deterministic(dir / f), deterministic(again / f)) << f;
  EXPECT_EQ(slurp(dir / "commands.jsonl"), slurp(again / "commands.jsonl"));
  // The final weights too, byte for byte (the stopped run's, where it stopped).
  ASSERT_TRUE(fs::exists(dir / "weights-0.bin"));
  EXPECT_EQ(slurp(dir / "weights-0.bin"), slurp(again / "weights-0.bin"));
  fs::remove_all(dir);
  fs::remove_all(again);
}

// The gpt on a text file, with a live precision change mid-run and a stop:
// the replay repeats its steps, evaluations, events, gradient statistics,
// the text it wrote at each evaluation and its final weights, bit for bit.
TEST(Journal, AGptRunWithALiveChangeReplaysBitForBit) {
  const fs::path dir = temp("gpt"), again = temp("gpt_replay"), text = temp("gpt_text.txt");
  {
    std::ofstream out(text);
    for (int i = 0; i < 80; ++i) out << "the hacker wrote " << i % 7 << " lines of code and the machine ran them.\n";
  }
  RunConfig c;
  c.model = "gpt";
  c.dataset = "text:" + text.string();
  c.recipe = "mixed-bf16";
  c.depth = 1;
  c.width = 16;
  c.heads = 2;
  c.context = 8;
  c.batch = 8;
  c.steps = 100000;  // stopped long before
  c.optimizer = "adamw";
  c.lr = 3e-3;
  c.eval_every = 10;
  c.stats_every = 7;
  c.threads = 1;
  {
    Trainer t;
    t.add_run(c);
    attach_journal(t, dir.string(), {"gpt"});
    t.start();
    std::vector<Record> all;
    ASSERT_TRUE(drain_until(t, all, [](auto& a) { return count_steps(a, 0) >= 15; }));
    t.set_layer_precision(0, "blocks.0.fc1", LayerPrecision{Format::FP32, Format::FP32, Format::FP32, Format::FP32});
    ASSERT_TRUE(drain_until(t, all, [](auto& a) { return count_steps(a, 0) >= 40; }));
    t.stop();
    t.wait();
  }
  const JournalContents j = read_journal(dir.string());
  ASSERT_EQ(j.commands.size(), 1u);
  EXPECT_EQ(j.commands[0].change.kind, LiveChange::Kind::LayerPrecision);
  EXPECT_EQ(j.runs[0].status, "stopped");
  EXPECT_GE(j.exports[0].history.texts.size(), 4u);  // steps 10, 20, 30, 40, ...

  Trainer r;
  r.add_run(j.runs[0].config);
  for (const StampedChange& ch : j.commands) r.schedule(ch);
  r.stop_run_at(0, j.runs[0].steps);
  attach_journal(r, again.string(), {"gpt"});
  r.start();
  r.wait();
  for (const char* f : {"steps.csv", "evals.csv", "events.csv", "grads.csv", "summary.csv"})
    EXPECT_EQ(deterministic(dir / f), deterministic(again / f)) << f;
  EXPECT_EQ(slurp(dir / "commands.jsonl"), slurp(again / "commands.jsonl"));
  EXPECT_EQ(slurp(dir / "samples.jsonl"), slurp(again / "samples.jsonl"));
  ASSERT_TRUE(fs::exists(dir / "weights-0.bin"));
  EXPECT_EQ(slurp(dir / "weights-0.bin"), slurp(again / "weights-0.bin"));
  fs::remove_all(dir);
  fs::remove_all(again);
  fs::remove(text);
}

// The setup panel's loss-scaler change: it acts from the next step on (the
// scale restarts at the new init when the mode changes), commands.jsonl
// stamps it with the step it followed, and the replay repeats it bit for bit.
TEST(Journal, ALossScalerChangeActsAtTheNextStepAndReplays) {
  const fs::path dir = temp("scaler"), again = temp("scaler_replay");
  RunConfig c = spirals(200);
  c.recipe = "mixed-bf16";  // no loss scaling until the change
  std::int64_t after = 0;
  {
    Trainer t;
    t.add_run(c);
    attach_journal(t, dir.string(), {"scaler"});
    t.set_step_rate(400);  // the change lands mid-run
    t.start();
    std::vector<Record> all;
    ASSERT_TRUE(drain_until(t, all, [](auto& a) { return count_steps(a, 0) >= 10; }));
    LossScalerConfig s;
    s.mode = ScalingMode::Dynamic;
    s.init_scale = 256;
    s.growth_interval = 5;
    t.set_loss_scaler(0, s);
    t.set_step_rate(0);
    t.wait();
  }
  const JournalContents j = read_journal(dir.string());
  ASSERT_EQ(j.commands.size(), 1u);
  const StampedChange& ch = j.commands[0];
  EXPECT_EQ(ch.change.kind, LiveChange::Kind::LossScaler);
  EXPECT_EQ(ch.change.scaler.mode, ScalingMode::Dynamic);
  EXPECT_EQ(ch.change.scaler.init_scale, 256.0);
  EXPECT_EQ(ch.change.scaler.growth_interval, 5);
  after = ch.after_step;
  ASSERT_GE(after, 10);
  ASSERT_LT(after + 6, 200);
  const std::vector<StepMetrics>& steps = j.exports[0].history.steps;
  ASSERT_EQ(steps.size(), 200u);
  for (std::int64_t k = 0; k < after; ++k) ASSERT_EQ(steps[static_cast<std::size_t>(k)].loss_scale, 1.0f) << k;
  EXPECT_EQ(steps[static_cast<std::size_t>(after)].loss_scale, 256.0f);  // step after + 1
  // Dynamic from then on: five clean steps grow it.
  EXPECT_EQ(steps[static_cast<std::size_t>(after) + 5].loss_scale, 512.0f);

  Trainer r;
  r.add_run(j.runs[0].config);
  r.schedule(ch);
  attach_journal(r, again.string(), {"scaler"});
  r.start();
  r.wait();
  for (const char* f : {"steps.csv", "evals.csv", "events.csv", "grads.csv", "summary.csv"})
    EXPECT_EQ(deterministic(dir / f), deterministic(again / f)) << f;
  EXPECT_EQ(slurp(dir / "commands.jsonl"), slurp(again / "commands.jsonl"));
  fs::remove_all(dir);
  fs::remove_all(again);
}

TEST(Journal, AnInterruptedFolderSaysSoAndKeepsItsRows) {
  const fs::path dir = temp("interrupted");
  {
    Journal j(dir.string(), {{"fp32", spirals(100)}});
    j.record(Record{RunStatus{0, RunState::Running, "", 100}});
    for (int s = 1; s <= 5; ++s) {
      StepMetrics m;
      m.step = s;
      m.loss = 1.0 / s;
      j.record(Record{m});
    }
    // The process dies here: no finish(); the destructor only flushes and
    // lets go of the lock, as the kernel does for a killed process.
  }
  // A torn last line, as a kill in the middle of a write leaves it.
  std::ofstream(dir / "steps.csv", std::ios::app) << "0,fp32,fp32,6,0,0.1";
  const JournalContents c = read_journal(dir.string());
  EXPECT_TRUE(c.interrupted);
  EXPECT_EQ(c.status, "interrupted");
  EXPECT_EQ(c.runs[0].status, "interrupted");
  EXPECT_EQ(c.runs[0].steps, 5);
  ASSERT_EQ(c.exports[0].history.steps.size(), 5u);
  EXPECT_EQ(c.exports[0].summary.steps, 5);  // computed: no summary row was written
  EXPECT_EQ(c.exports[0].summary.final_loss, 0.2);
  fs::remove_all(dir);
}

TEST(Journal, OneWriterPerFolder) {
  const fs::path dir = temp("lock");
  Journal first(dir.string(), {{"fp32", spirals(10)}});
  try {
    Journal second(dir.string(), {{"fp32", spirals(10)}});
    FAIL() << "two writers";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), dir.string() + ": another process is writing this run folder");
  }
  // While it is being written, the folder is running, not interrupted.
  EXPECT_FALSE(read_journal_status(dir.string()).interrupted);
  fs::remove_all(dir);
}

TEST(Journal, MalformedFilesAreOneLineNamingTheFile) {
  const fs::path dir = temp("bad");
  {
    Journal j(dir.string(), {{"fp32", spirals(10)}});
    j.finish();
  }
  auto error = [&] {
    try {
      read_journal(dir.string());
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error(), "");
  std::ofstream(dir / "steps.csv", std::ios::app) << "0,fp32,fp32,1,0\r\n";
  EXPECT_EQ(error(), (dir / "steps.csv").string() + ":2: expected 25 fields, got 5");  // steps.csv has 25 columns
  std::ofstream(dir / "steps.csv") << csv_header(CsvFile::Steps) << "7" << std::string(24, ',') << "\r\n";
  EXPECT_NE(error().find("run_id 7 is not a run of this folder"), std::string::npos) << error();
  std::ofstream(dir / "steps.csv") << csv_header(CsvFile::Steps);
  std::ofstream(dir / "commands.jsonl") << "{\"run\": 0, \"after_step\": 3, \"inspect\": true}\n{\"run\": 0}\n";
  EXPECT_EQ(error(), (dir / "commands.jsonl").string() + ":2: '.after_step' is missing");
  std::ofstream(dir / "commands.jsonl") << "";
  std::ofstream(dir / "status.json") << "{\"status\": ";
  EXPECT_EQ(error(), (dir / "status.json").string() + ": not valid JSON");
  fs::remove_all(dir);
}

TEST(Journal, LiveChangesRoundTripAsJsonLines) {
  LiveChange p;
  p.kind = LiveChange::Kind::LayerPrecision;
  p.layer = "fc1";
  p.precision = {Format::FP16, Format::FP16, Format::FP16, Format::FP16};
  LiveChange s;
  s.kind = LiveChange::Kind::LossScaler;
  s.scaler.init_scale = 512;
  s.scaler.growth_interval = 7;
  LiveChange f;
  f.kind = LiveChange::Kind::InjectFault;
  f.fault = FaultTarget::Activations;
  f.layer = "relu1";
  f.fault_inf = true;
  for (const LiveChange& c : {p, s, f}) {
    const StampedChange back = parse_live_change(live_change_json(2, 17, c), "x");
    EXPECT_EQ(back.run_id, 2);
    EXPECT_EQ(back.after_step, 17);
    EXPECT_EQ(live_change_json(2, 17, back.change), live_change_json(2, 17, c));
  }
  EXPECT_THROW(parse_live_change(R"({"run": 0, "after_step": 1, "inspect": true, "set_loss_scaler": {}})", "x"),
               std::runtime_error);
  EXPECT_THROW(parse_live_change(R"({"run": -1, "after_step": 1, "inspect": true})", "x"), std::runtime_error);
}

}  // namespace
