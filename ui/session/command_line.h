// Command line of the desktop app (DESIGN.md "Command line" spellings):
//   precision-lab [--config FILE] [--recipe R] [--model M] [--dataset D]
//                 [--start] [--compare r1,r2,...] [--steps N] [--epochs N]
//                 [--screenshot FILE] [--screenshot-after-ms N] ...
#pragma once

#include <QString>
#include <QStringList>

#include "train/run_config.h"

struct LaunchOptions {
  engine::RunConfig config;        // --config file, then the single options on top
  bool configGiven = false;        // --config or any run option was given
  bool start = false;              // --start: begin at once (the comparison with --compare)
  QStringList compare;             // --compare r1,r2,...
  QString screenshot;              // --screenshot FILE
  int screenshotAfterMs = -1;      // --screenshot-after-ms N
  QString view = QStringLiteral("live");  // --view live|compare|gradients|export|compare-dialog
  bool measure = false;            // --measure: print latency/throughput when training ends, then quit
  bool threadsGiven = false;
};

// Parses `arguments` (arguments[0] is the program). Returns false with a
// one-line *error naming the option (or the config file) on bad input.
// *exitNow is set (and true returned) for --help and --version, whose text
// is in *error for the caller to print. GUI thread; no QApplication needed
// beyond the one that exists.
bool parseLaunchOptions(const QStringList& arguments, LaunchOptions& out, QString* error, bool* exitNow);
