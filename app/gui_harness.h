// The desktop app's unattended modes: --screenshot (render the window or a
// chosen view into a file and quit) and --measure (the UI thread's event-loop
// latency and the training throughput, printed when training ends).
#pragma once

#include <QElapsedTimer>

#include "session/latency_probe.h"

class MainWindow;
struct LaunchOptions;

// Decided before QApplication exists, because it picks the platform: true
// for --screenshot or --measure without a display (and no QT_QPA_PLATFORM),
// so CI needs no X server.
bool wantsOffscreenHarness(int argc, char** argv);

// Arms --measure and --screenshot on `window` as `options` ask; both end the
// application (QApplication::exit) when done. Lives as long as the event loop.
class GuiHarness {
 public:
  GuiHarness(MainWindow& window, const LaunchOptions& options);

 private:
  void armMeasure();
  void armScreenshot();

  MainWindow& m_window;
  const LaunchOptions& m_options;
  LatencyProbe m_probe;
  QElapsedTimer m_trainingClock;
};
