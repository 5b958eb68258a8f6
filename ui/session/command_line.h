// Command line of the desktop app (README.md "Command line" spellings):
//   precision-lab [--config FILE] [--recipe R] [--model M] [--dataset D]
//                 [--start] [--compare r1,r2,...] [--steps N] [--epochs N]
//                 [--screenshot FILE] [--screenshot-after-ms N] [--lecture NAME|FILE]
//                 [--presentation] [--speed N] [--value X] ...
#pragma once

#include <QString>
#include <QStringList>

#include <string>
#include <utility>
#include <vector>

#include "train/run_config.h"

struct LaunchOptions {
  engine::RunConfig config;        // --config file (or the defaults), then the single options on top
  bool configGiven = false;        // --config or any run option was given
  QString configFile;              // --config FILE, as given
  // Why --config FILE cannot be used (missing, unreadable, bad keys or
  // values): the window opens and says so; "" when fine.
  QString configError;
  // The run options given (key, value), in order: each changes only the
  // setting it names (applyLaunchSettings).
  std::vector<std::pair<std::string, std::string>> settings;
  bool start = false;              // --start: begin at once (the comparison with --compare)
  QStringList compare;             // --compare r1,r2,...
  QString screenshot;              // --screenshot FILE
  int screenshotAfterMs = -1;      // --screenshot-after-ms N
  QString view = QStringLiteral("live");  // --view live|compare|compare-difference|gradients|export|compare-dialog
  bool measure = false;
  QString lecture;                 // --lecture NAME|FILE: the lesson (a built-in preset or a preset file)
  bool presentation = false;       // --presentation: start in presentation view
  double speed = -1;               // --speed N: steps per second (0: as fast as possible; -1: not given)
  QString value;                   // --value X: the format explorer's value (--view format-explorer)            // --measure: print latency/throughput when training ends, then quit
  bool threadsGiven = false;
};

// Parses `arguments` (arguments[0] is the program). Returns false with a
// one-line *error naming the option (or the config file) on bad input.
// *exitNow is set (and true returned) for --help and --version, whose text
// is in *error for the caller to print. GUI thread; no QApplication needed
// beyond the one that exists.
bool parseLaunchOptions(const QStringList& arguments, LaunchOptions& out, QString* error, bool* exitNow);

// The run config the window gets from the command line: `current` (what
// the setup panel shows), replaced by the --config file when one was given
// and loaded, with each run option on top. An option changes only what it
// names: --dataset spirals keeps the recipe, loss scaling, batch, seed and
// length. Throws std::runtime_error (one line) on a bad value.
engine::RunConfig applyLaunchSettings(const engine::RunConfig& current, const LaunchOptions& options);

// Whether argv asks only for --help or --version: answered before
// QApplication exists, so it works without a display.
bool wantsHelpOnly(int argc, char** argv);
// The --help text (needs no QGuiApplication; a QCoreApplication is enough).
QString launchHelpText();
