// Command line: QCommandLineParser for the spelling, the engine's config
// parser for the values (same checks and messages as precision-lab-cli).
#include "session/command_line.h"

#include <QCommandLineOption>
#include <QCommandLineParser>
#include <QCoreApplication>

#include <cmath>
#include <exception>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "amp/recipe.h"
#include "train/model_defaults.h"

namespace {

// The run settings spelled as the CLI's (README.md "Command line"), checked by the engine.
const std::vector<std::pair<QString, QString>>& runKeys() {
  static const std::vector<std::pair<QString, QString>> keys = {
      {QStringLiteral("recipe"), QStringLiteral("Precision recipe (fp32, fp16, mixed-fp16, mixed-bf16, fp8).")},
      {QStringLiteral("model"), QStringLiteral("Model: mlp, cnn, transformer, gpt (a gpt starts from AdamW).")},
      {QStringLiteral("dataset"),
       QStringLiteral("fashion-mnist, spirals, tiny-gradients, a folder of IDX files, jargon, or text:FILE.")},
      {QStringLiteral("steps"), QStringLiteral("Train this many steps.")},
      {QStringLiteral("epochs"), QStringLiteral("Train this many epochs.")},
      {QStringLiteral("batch"), QStringLiteral("Batch size.")},
      {QStringLiteral("optimizer"), QStringLiteral("sgd, adam or adamw.")},
      {QStringLiteral("lr"), QStringLiteral("Learning rate.")},
      {QStringLiteral("seed"), QStringLiteral("Seed: same seed, same initial weights and batches.")},
      {QStringLiteral("backend"), QStringLiteral("auto, cpu or cuda.")},
      {QStringLiteral("threads"), QStringLiteral("Engine CPU threads (0 = all cores).")},
  };
  return keys;
}

}  // namespace

bool wantsHelpOnly(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h" || a == "-?" || a == "--help-all" || a == "--version" || a == "-v") return true;
  }
  return false;
}

QString launchHelpText() {
  LaunchOptions o;
  QString text;
  bool exitNow = false;
  parseLaunchOptions({QStringLiteral("precision-lab"), QStringLiteral("--help")}, o, &text, &exitNow);
  return text;
}

engine::RunConfig applyLaunchSettings(const engine::RunConfig& current, const LaunchOptions& options) {
  engine::RunConfig c = current;
  std::string origin = "command line";
  if (!options.configFile.isEmpty() && options.configError.isEmpty()) {
    c = engine::load_run_config(options.configFile.toStdString());
    if (c.threads == 0) c.threads = current.threads;  // the file leaves the panel's thread count
    origin = options.configFile.toStdString();
  }
  bool model = false, optimizer = false, lr = false;
  for (const auto& [key, value] : options.settings) {
    engine::set_config_value(c, key, value, "--" + key);
    if (key == "epochs") c.steps = 0;  // --epochs after a length in steps: epochs count
    model = model || key == "model";
    optimizer = optimizer || key == "optimizer";
    lr = lr || key == "lr";
  }
  // As precision-lab-cli: a model named here starts from its own optimizer
  // (the gpt from AdamW) unless the options name one; a config file is
  // taken as it is written.
  if (model && options.configFile.isEmpty()) engine::apply_optimizer_defaults(c, optimizer, lr);
  engine::validate(c, origin);
  return c;
}

bool parseLaunchOptions(const QStringList& arguments, LaunchOptions& out, QString* error, bool* exitNow) {
  *exitNow = false;
  QCommandLineParser parser;
  parser.setApplicationDescription(QStringLiteral("Interactive mixed-precision training experiments."));
  const QCommandLineOption help = parser.addHelpOption();
  const QCommandLineOption version = parser.addVersionOption();
  const QCommandLineOption config(QStringLiteral("config"), QStringLiteral("Run settings from a JSON config file."),
                                  QStringLiteral("file"));
  const QCommandLineOption start(QStringLiteral("start"),
                                 QStringLiteral("Start at once (the comparison, with --compare)."));
  const QCommandLineOption compare(QStringLiteral("compare"),
                                   QStringLiteral("Recipes to compare side by side, e.g. fp32,fp16,mixed-fp16."),
                                   QStringLiteral("recipes"));
  const QCommandLineOption screenshot(
      QStringLiteral("screenshot"),
      QStringLiteral("Save the window to <file> and quit: once it is laid out, or, with --start, once the runs "
                     "have drawn points."),
      QStringLiteral("file"));
  const QCommandLineOption screenshotAfter(QStringLiteral("screenshot-after-ms"),
                                           QStringLiteral("Take the --screenshot <ms> after the window shows."),
                                           QStringLiteral("ms"));
  const QCommandLineOption view(QStringLiteral("view"),
                                QStringLiteral("What --screenshot shows: live, compare, compare-difference (the Compare tab "
                                               "in its difference-to-FP32 mode), samples, gradients, export, "
                                               "compare-dialog, format-explorer, block-view, step-inspector, history (past runs; the newest "
                                               "interrupted one opened on the charts), solver (the Solver tab; "
                                               "with --start it solves its default case first)."),
                                QStringLiteral("view"), QStringLiteral("live"));
  const QCommandLineOption measure(
      QStringLiteral("measure"),
      QStringLiteral("Measure the UI thread's event-loop latency and the training throughput; print them when "
                     "training ends, then quit."));
  const QCommandLineOption lecture(
      QStringLiteral("lecture"),
      QStringLiteral("Choose a lesson: a built-in preset's name (precision-lab-cli lecture --list) or a preset file; "
                     "--start runs all its runs."),
      QStringLiteral("name"));
  const QCommandLineOption presentation(QStringLiteral("presentation"),
                                        QStringLiteral("Start in presentation view (F11 toggles it)."));
  const QCommandLineOption speed(QStringLiteral("speed"),
                                 QStringLiteral("Steps per second of each run (1, 2, 5, 10, 20, 50, 100; 0: as fast as "
                                                "possible)."),
                                 QStringLiteral("steps/s"));
  const QCommandLineOption value(QStringLiteral("value"),
                                 QStringLiteral("The format explorer's value (with --view format-explorer)."),
                                 QStringLiteral("x"));
  const auto& keys = runKeys();
  std::vector<QCommandLineOption> keyOptions;
  for (const auto& [key, description] : keys) keyOptions.emplace_back(key, description, QStringLiteral("value"));
  parser.addOptions({config, start, compare, screenshot, screenshotAfter, view, measure, lecture, presentation, speed,
                     value});
  for (const QCommandLineOption& o : keyOptions) parser.addOption(o);

  if (!parser.parse(arguments)) {
    *error = parser.errorText();
    return false;
  }
  if (parser.isSet(help)) {
    *exitNow = true;
    *error = parser.helpText();
    return true;
  }
  if (parser.isSet(version)) {
    *exitNow = true;
    *error = QStringLiteral("%1 %2").arg(QCoreApplication::applicationName(), QCoreApplication::applicationVersion());
    return true;
  }
  if (!parser.positionalArguments().isEmpty()) {
    *error = QStringLiteral("unexpected argument '%1'").arg(parser.positionalArguments().front());
    return false;
  }

  LaunchOptions o;
  o.config.threads = 0;
  try {
    std::string origin = "command line";
    if (parser.isSet(config)) {
      o.configFile = parser.value(config);
      o.configGiven = true;
      try {
        o.config = engine::load_run_config(o.configFile.toStdString());  // names the file
        origin = o.configFile.toStdString();
      } catch (const std::exception& e) {
        // The window opens and says so (a user who started the app from a
        // menu sees no stderr).
        o.configError = QString::fromStdString(e.what());
      }
    }
    if (parser.isSet(QStringLiteral("steps")) && parser.isSet(QStringLiteral("epochs")))
      throw std::runtime_error("--steps and --epochs: give one of them");
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (!parser.isSet(keyOptions[i])) continue;
      const std::string key = keys[i].first.toStdString();
      engine::set_config_value(o.config, key, parser.value(keyOptions[i]).toStdString(), "--" + key);
      o.settings.emplace_back(key, parser.value(keyOptions[i]).toStdString());
      o.configGiven = true;
      if (key == "threads") o.threadsGiven = true;
    }
    // --epochs after a config with steps: epochs counts.
    if (parser.isSet(QStringLiteral("epochs"))) o.config.steps = 0;
    if (o.configError.isEmpty()) engine::validate(o.config, origin);
    if (parser.isSet(compare)) {
      for (const QString& r : parser.value(compare).split(QLatin1Char(','), Qt::SkipEmptyParts)) {
        try {
          (void)engine::make_recipe(r.trimmed().toStdString());
        } catch (const std::exception& e) {
          throw std::runtime_error(std::string("--compare: ") + e.what());  // "unknown recipe 'x' (expected ...)"
        }
        o.compare << r.trimmed();
      }
      if (o.compare.isEmpty()) throw std::runtime_error("--compare: no recipe given");
    }
  } catch (const std::exception& e) {
    *error = QString::fromStdString(e.what());
    return false;
  }
  o.start = parser.isSet(start);
  o.screenshot = parser.value(screenshot);
  if (parser.isSet(screenshotAfter)) {
    bool ok = false;
    o.screenshotAfterMs = parser.value(screenshotAfter).toInt(&ok);
    if (!ok || o.screenshotAfterMs < 0) {
      *error = QStringLiteral("--screenshot-after-ms: '%1' is not a number of milliseconds")
                   .arg(parser.value(screenshotAfter));
      return false;
    }
  }
  o.view = parser.value(view);
  static const QStringList views = {QStringLiteral("live"), QStringLiteral("compare"),
                                    QStringLiteral("compare-difference"), QStringLiteral("samples"),
                                    QStringLiteral("gradients"),
                                    QStringLiteral("export"), QStringLiteral("compare-dialog"),
                                    QStringLiteral("format-explorer"), QStringLiteral("block-view"),
                                    QStringLiteral("step-inspector"),
                                    QStringLiteral("history"), QStringLiteral("solver")};
  if (!views.contains(o.view)) {
    *error = QStringLiteral("--view: '%1' is not one of %2").arg(o.view, views.join(QStringLiteral(", ")));
    return false;
  }
  o.measure = parser.isSet(measure);
  o.lecture = parser.value(lecture);
  o.presentation = parser.isSet(presentation);
  if (parser.isSet(speed)) {
    bool ok = false;
    o.speed = parser.value(speed).toDouble(&ok);
    if (!ok || o.speed < 0 || !std::isfinite(o.speed)) {
      *error = QStringLiteral("--speed: '%1' is not a number of steps per second (0: as fast as possible)")
                   .arg(parser.value(speed));
      return false;
    }
  }
  o.value = parser.value(value);
  out = o;
  return true;
}
