// CSV export: RFC 4180 quoting, round-trip numbers, locale independence,
// atomic files.
#include <gtest/gtest.h>

#include <clocale>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "report/csv.h"

namespace fs = std::filesystem;

namespace {
fs::path temp_dir(const char* name) {
  fs::path p = fs::temp_directory_path() / ("pl_csv_" + std::string(name) + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p;
}

engine::RunExport sample_run() {
  engine::RunExport r;
  r.run_id = 0;
  r.name = "run 1, \"mixed\"";
  r.recipe = "mixed-fp16";
  r.config.recipe = "mixed-fp16";
  for (int i = 1; i <= 3; ++i) {
    engine::StepMetrics m;
    m.step = i;
    m.loss = 1.0 / 3.0 * i;
    m.loss_scale = 65536.0;
    m.overflow = i == 2;
    m.skipped = i == 2;
    m.grad_norm = 0.1 + i;
    m.lr = 0.05;
    m.mem.weights = 1000 * i;
    m.mem.emulation = 7 * i;
    m.wall_ms = 1.25;
    r.history.add(m);
  }
  r.history.add(engine::EvalMetrics{0, 3, 0, 0.5, 0.875});
  r.history.add(engine::Event{0, 2, engine::EventKind::Overflow, "fc1, \"first\"", "weight_grad", 12});
  engine::Event scale{0, 2, engine::EventKind::ScaleChange, "", "backoff", 0};
  scale.value = 0.5;  // a scale below 1 (a bf16-pretrained model in FP16)
  r.history.add(scale);
  engine::Event change{0, 3, engine::EventKind::PrecisionChange, "fc2", "", 0};
  change.precision = {engine::Format::FP16, engine::Format::FP16, engine::Format::FP32, engine::Format::FP16};
  r.history.add(change);
  engine::GradStats g;
  g.step = 3;
  g.layer = "fc1";
  g.format = "FP16";
  g.total = 10;
  g.underflow_unscaled = 0.25;
  g.shadow = true;
  g.output_error = 1e-3;
  g.grad_error = 2.5e-2;
  r.history.add(g);
  r.summary.recipe = "mixed-fp16";
  r.summary.steps = 3;
  r.summary.final_loss = 1.0;
  return r;
}
}  // namespace

TEST(Csv, QuotesOnlyWhenNeeded) {
  EXPECT_EQ(engine::csv_field("fc1"), "fc1");
  EXPECT_EQ(engine::csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(engine::csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(engine::csv_field("two\nlines"), "\"two\nlines\"");
}

TEST(Csv, NumbersRoundTripAndIgnoreLocale) {
  for (double v : {0.1, 1.0 / 3.0, 6.103515625e-05, 65504.0, 1e-300, -2.5}) {
    const std::string s = engine::csv_number(v);
    EXPECT_EQ(std::strtod(s.c_str(), nullptr), v) << s;
  }
  EXPECT_EQ(engine::csv_number(std::nan("")), "nan");
  EXPECT_EQ(engine::csv_number(-INFINITY), "-inf");
  // A locale with a decimal comma must not change the output.
  if (std::setlocale(LC_ALL, "de_DE.UTF-8") || std::setlocale(LC_ALL, "fr_FR.UTF-8")) {
    EXPECT_EQ(engine::csv_number(0.5), "0.5");
    std::setlocale(LC_ALL, "C");
  }
}

TEST(Csv, ExportWritesTheDesignColumnsAndReadsBackEqual) {
  const fs::path dir = temp_dir("export");
  const engine::RunExport run = sample_run();
  engine::export_runs(dir.string(), {run});
  for (const char* f : {"steps.csv", "evals.csv", "events.csv", "summary.csv", "config.json"})
    EXPECT_TRUE(fs::exists(dir / f)) << f;
  const engine::CsvTable steps = engine::read_csv((dir / "steps.csv").string());
  for (const char* col : {"run_id", "recipe", "step", "epoch", "loss", "loss_scale", "overflow", "skipped",
                          "grad_norm", "lr", "mem_weights", "mem_master", "mem_grads", "mem_optimizer",
                          "mem_activations", "mem_total", "wall_ms"})
    EXPECT_GE(steps.column(col), 0) << col;
  ASSERT_EQ(steps.rows.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(std::strtod(steps.rows[i][static_cast<std::size_t>(steps.column("loss"))].c_str(), nullptr),
              run.history.steps[i].loss);
    // Emulation buffers are reported apart and are not part of the total.
    EXPECT_EQ(steps.rows[i][static_cast<std::size_t>(steps.column("mem_emulation"))], std::to_string(7 * (i + 1)));
    EXPECT_EQ(steps.rows[i][static_cast<std::size_t>(steps.column("mem_total"))], std::to_string(1000 * (i + 1)));
    EXPECT_EQ(steps.rows[i][static_cast<std::size_t>(steps.column("overflow"))], i == 1 ? "1" : "0");
  }
  const engine::CsvTable events = engine::read_csv((dir / "events.csv").string());
  ASSERT_EQ(events.rows.size(), 3u);
  EXPECT_EQ(events.rows[0][static_cast<std::size_t>(events.column("layer"))], "fc1, \"first\"");
  EXPECT_EQ(events.rows[0][static_cast<std::size_t>(events.column("kind"))], "overflow");
  // A scale below 1 is a value, not an integer count gone wrong.
  EXPECT_EQ(events.rows[1][static_cast<std::size_t>(events.column("kind"))], "scale_change");
  EXPECT_EQ(events.rows[1][static_cast<std::size_t>(events.column("value"))], "0.5");
  EXPECT_EQ(events.rows[1][static_cast<std::size_t>(events.column("count"))], "0");
  EXPECT_EQ(events.rows[2][static_cast<std::size_t>(events.column("tensor"))], "fp16/fp16/fp32/fp16");
  // Every file names the run.
  for (const char* f : {"steps.csv", "evals.csv", "events.csv", "grads.csv", "summary.csv"}) {
    const engine::CsvTable t = engine::read_csv((dir / f).string());
    ASSERT_EQ(t.column("run"), 1) << f;
    ASSERT_FALSE(t.rows.empty()) << f;
    for (const auto& row : t.rows) EXPECT_EQ(row[1], "run 1, \"mixed\"") << f;
  }
  const engine::CsvTable grads = engine::read_csv((dir / "grads.csv").string());
  ASSERT_EQ(grads.rows.size(), 1u);
  EXPECT_EQ(grads.rows[0][static_cast<std::size_t>(grads.column("shadow"))], "1");
  EXPECT_EQ(std::strtod(grads.rows[0][static_cast<std::size_t>(grads.column("grad_error"))].c_str(), nullptr), 2.5e-2);
  EXPECT_EQ(std::strtod(grads.rows[0][static_cast<std::size_t>(grads.column("output_error"))].c_str(), nullptr), 1e-3);
  const engine::CsvTable summary = engine::read_csv((dir / "summary.csv").string());
  for (const char* col : {"run_id", "recipe", "model", "dataset", "backend", "steps", "final_loss", "val_accuracy",
                          "overflow_steps", "skipped_steps", "final_loss_scale", "peak_memory_bytes",
                          "wall_seconds", "samples_per_second"})
    EXPECT_GE(summary.column(col), 0) << col;
  fs::remove_all(dir);
}

TEST(Csv, FailedExportLeavesNoHalfFiles) {
  const fs::path dir = temp_dir("fail");
  fs::create_directories(dir);
  // A directory where steps.csv should go makes the rename fail.
  fs::create_directories(dir / "steps.csv");
  EXPECT_THROW(engine::export_runs(dir.string(), {sample_run()}), std::runtime_error);
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    EXPECT_EQ(name.find(".tmp"), std::string::npos) << "left " << name;
  }
  EXPECT_TRUE(fs::is_directory(dir / "steps.csv"));
  fs::remove_all(dir);
}

// A text run's evaluations: bits per token (loss / ln 2) and perplexity
// (e^loss) beside the loss in nats; empty cells for every other data set.
TEST(Csv, TokenMetricsForTextRunsOnly) {
  const fs::path dir = temp_dir("tokens");
  engine::RunExport text = sample_run();
  text.history.evals.clear();
  engine::EvalMetrics e{0, 3, 0, 1.5, 0.25};
  e.per_token = true;
  text.history.add(e);
  text.summary = text.history.summarize(1.0);
  engine::RunExport image = sample_run();
  image.run_id = 1;
  image.summary = image.history.summarize(1.0);
  engine::export_runs(dir.string(), {text, image});

  const engine::CsvTable evals = engine::read_csv((dir / "evals.csv").string());
  ASSERT_EQ(evals.rows.size(), 2u);
  const auto cell = [](const engine::CsvTable& t, std::size_t row, const char* col) {
    const int c = t.column(col);
    EXPECT_GE(c, 0) << col;
    return c < 0 ? std::string("?") : t.rows[row][static_cast<std::size_t>(c)];
  };
  // 1.5 nats: 1.5 / ln 2 = 2.16404256133344... bits, e^1.5 = 4.48168907033806...
  EXPECT_NEAR(std::strtod(cell(evals, 0, "val_bits_per_token").c_str(), nullptr), 2.1640425613334453, 1e-15);
  EXPECT_NEAR(std::strtod(cell(evals, 0, "val_perplexity").c_str(), nullptr), 4.4816890703380645, 1e-14);
  EXPECT_EQ(cell(evals, 0, "val_bits_per_token"), engine::csv_number(1.5 / std::log(2.0)));
  EXPECT_EQ(cell(evals, 0, "val_perplexity"), engine::csv_number(std::exp(1.5)));
  EXPECT_EQ(cell(evals, 1, "val_bits_per_token"), "");
  EXPECT_EQ(cell(evals, 1, "val_perplexity"), "");
  const engine::CsvTable summary = engine::read_csv((dir / "summary.csv").string());
  EXPECT_EQ(cell(summary, 0, "val_perplexity"), engine::csv_number(std::exp(1.5)));
  EXPECT_EQ(cell(summary, 1, "val_perplexity"), "");

  // Read back: the rows know which run was text.
  for (std::size_t r = 0; r < 2; ++r) {
    engine::EvalMetrics back;
    engine::csv_read(engine::CsvRow{evals, "evals.csv", r}, back);
    EXPECT_EQ(back.per_token, r == 0);
    engine::RunSummary s;
    engine::csv_read(engine::CsvRow{summary, "summary.csv", r}, s);
    EXPECT_EQ(s.per_token, r == 0);
  }
  fs::remove_all(dir);
}

// A gpt's z-loss term has its own column beside the cross-entropy, and reads
// back; a steps.csv from before the column reads as 0.
TEST(Csv, TheZLossTermIsAColumnOfSteps) {
  const fs::path dir = temp_dir("z_term");
  engine::RunExport run = sample_run();
  run.history.steps.front().z_term = 0.3125;
  engine::export_runs(dir.string(), {run});
  const engine::CsvTable steps = engine::read_csv((dir / "steps.csv").string());
  const int c = steps.column("z_term");
  ASSERT_GE(c, 0);
  EXPECT_EQ(steps.rows[0][static_cast<std::size_t>(c)], "0.3125");
  engine::StepMetrics back;
  engine::csv_read(engine::CsvRow{steps, "steps.csv", 0}, back);
  EXPECT_EQ(back.z_term, 0.3125);
  EXPECT_EQ(back.loss, run.history.steps.front().loss);
  engine::CsvTable old = steps;
  old.header.erase(old.header.begin() + c);
  for (auto& row : old.rows) row.erase(row.begin() + c);
  engine::StepMetrics before;  // read without a z_term column: no error, the term stays 0
  engine::csv_read(engine::CsvRow{old, "old/steps.csv", 0}, before);
  EXPECT_EQ(before.z_term, 0.0);
  EXPECT_EQ(before.loss, run.history.steps.front().loss);
  fs::remove_all(dir);
}

// Files written before the token columns read as they did (no text run).
TEST(Csv, FilesWithoutTokenColumnsStillRead) {
  const engine::CsvTable old = engine::parse_csv(
      "run_id,run,recipe,step,epoch,val_loss,val_accuracy\r\n0,fp32,fp32,300,2,0.5,0.875\r\n", "old/evals.csv");
  engine::EvalMetrics e;
  engine::csv_read(engine::CsvRow{old, "old/evals.csv", 0}, e);
  EXPECT_EQ(e.step, 300);
  EXPECT_EQ(e.val_loss, 0.5);
  EXPECT_FALSE(e.per_token);
  const engine::CsvTable bad = engine::parse_csv(
      "run_id,run,recipe,step,epoch,val_loss,val_accuracy,val_bits_per_token,val_perplexity\r\n"
      "0,fp32,fp32,300,2,0.5,0.875,abc,\r\n",
      "bad/evals.csv");
  try {
    engine::csv_read(engine::CsvRow{bad, "bad/evals.csv", 0}, e);
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& ex) {
    EXPECT_EQ(std::string(ex.what()), "bad/evals.csv:2: 'val_bits_per_token' is not a number: 'abc'");
  }
}
