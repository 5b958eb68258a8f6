// precision-lab: the desktop app's entry point.
//   precision-lab [--screenshot FILE]
// --screenshot renders the main window into FILE (any format Qt writes,
// by suffix) once the event loop has laid it out and painted it, then
// exits: 0 when the file was written, 1 otherwise. Without a display (and
// no QT_QPA_PLATFORM) it renders offscreen, so CI needs no X server.
#include <QApplication>
#include <QCommandLineParser>
#include <QPixmap>
#include <QTimer>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "main_window.h"

namespace {

// Decided before QApplication exists, because it picks the platform.
bool wantsOffscreenScreenshot(int argc, char** argv) {
  if (std::getenv("QT_QPA_PLATFORM") || std::getenv("DISPLAY") || std::getenv("WAYLAND_DISPLAY")) return false;
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--screenshot") == 0 || std::strncmp(argv[i], "--screenshot=", 13) == 0) return true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (wantsOffscreenScreenshot(argc, argv)) qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  QApplication::setApplicationName(QStringLiteral("Precision Lab"));
  QApplication::setApplicationVersion(QStringLiteral("0.1.0"));
  QApplication::setDesktopFileName(QStringLiteral("precision-lab"));

  QCommandLineParser parser;
  parser.setApplicationDescription(QStringLiteral("Interactive mixed-precision training experiments."));
  parser.addHelpOption();
  parser.addVersionOption();
  const QCommandLineOption screenshot(
      QStringLiteral("screenshot"),
      QStringLiteral("Render the main window to <file> once it is laid out, then exit."),
      QStringLiteral("file"));
  parser.addOption(screenshot);
  parser.process(app);

  MainWindow window;
  window.resize(1400, 900);
  window.show();

  if (parser.isSet(screenshot)) {
    const QString file = parser.value(screenshot);
    // A short delay rather than a zero timer: the docks, splitters and
    // chart scenes settle over a few event-loop passes after show().
    QTimer::singleShot(500, &window, [&window, file] {
      const bool ok = window.grab().save(file);
      if (!ok) std::fprintf(stderr, "precision-lab: --screenshot: cannot write %s\n", qPrintable(file));
      QApplication::exit(ok ? 0 : 1);
    });
  }
  return app.exec();
}
