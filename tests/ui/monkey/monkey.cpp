// test_monkey: random clicks, keys, menu actions, value edits and run
// sequences (start, stop, step, compare, export, lessons, F11) on the real
// window for a budget of seconds, from a seed. Fails on a late event loop
// (more than --max-late-ms of lateness the UI thread itself caused), on a
// hang (no heartbeat for --hang-s: the UI thread's stack is printed), and,
// built with sanitizers, on any report. Prints the seed and the last actions
// on every failure, so `test_monkey --seconds S --seed N` replays it.
#include <QAbstractButton>
#include <QAbstractItemView>
#include <QAbstractSlider>
#include <QAbstractSpinBox>
#include <QAction>
#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QDialog>
#include <QDir>
#include <QElapsedTimer>
#include <QFileDialog>
#include <QLineEdit>
#include <QMenu>
#include <QMenuBar>
#include <QMessageBox>
#include <QPointer>
#include <QScreen>
#include <QTabBar>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>

#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <random>
#include <string>
#include <thread>

#include "main_window.h"
#include "monkey_log.h"
#include "session/latency_probe.h"
#include "ui/window_parts.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__has_feature)
#if defined(__SANITIZE_ADDRESS__) || __has_feature(address_sanitizer)
#include <sanitizer/common_interface_defs.h>
#define PL_MONKEY_ASAN 1
#endif
#endif

namespace {

struct Options {
  double seconds = 60.0;
  std::uint64_t seed = 0;
  bool seedGiven = false;
  double maxLateMs = 200.0;
  double hangSeconds = 20.0;
  // What counts as the UI's lateness: "own" (lateness less the time the UI
  // thread waited for a core; includes waiting for the display server), or
  // "cpu" (the UI thread's CPU time in the late interval: for a machine
  // shared with builds, where the display server itself waits for a core).
  std::string lateMeasure = "own";
  // A second limit (0: none) on the lateness less the time the UI thread
  // waited for a core, whatever --late-measure says: with "cpu" it still
  // catches a UI thread that sleeps (on a lock, on a pipe, on the display
  // server) rather than computes.
  double maxBlockedMs = 0.0;
  // Print every event whose handling took at least this much of the UI
  // thread's CPU (0: off), with its receiver and depth: where a late
  // interval's time went.
  double profileMs = 0.0;
};

Options parseOptions(int argc, char** argv) {
  Options o;
  if (const char* s = std::getenv("PL_MONKEY_SECONDS")) o.seconds = std::atof(s);
  if (const char* s = std::getenv("PL_MONKEY_SEED")) o.seed = std::strtoull(s, nullptr, 10), o.seedGiven = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "test_monkey: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--seconds") o.seconds = std::atof(next());
    else if (a == "--seed") o.seed = std::strtoull(next(), nullptr, 10), o.seedGiven = true;
    else if (a == "--max-late-ms") o.maxLateMs = std::atof(next());
    else if (a == "--hang-s") o.hangSeconds = std::atof(next());
    else if (a == "--late-measure") o.lateMeasure = next();
    else if (a == "--max-blocked-ms") o.maxBlockedMs = std::atof(next());
    else if (a == "--profile-ms") o.profileMs = std::atof(next());
    else if (a == "--help" || a == "-h") {
      std::printf("test_monkey [--seconds S] [--seed N] [--max-late-ms MS] [--hang-s S] [--late-measure own|cpu]\n"
                  "           [--max-blocked-ms MS] [--profile-ms MS]\n"
                  "  (or PL_MONKEY_SECONDS, PL_MONKEY_SEED); without a seed one is drawn and printed.\n");
      std::exit(0);
    } else {
      std::fprintf(stderr, "test_monkey: unknown argument %s\n", a.c_str());
      std::exit(2);
    }
  }
  if (o.lateMeasure != "own" && o.lateMeasure != "cpu") {
    std::fprintf(stderr, "test_monkey: --late-measure must be own or cpu\n");
    std::exit(2);
  }
  if (!o.seedGiven) o.seed = std::random_device{}() ^ (static_cast<std::uint64_t>(std::random_device{}()) << 32);
  return o;
}

// Nanoseconds this thread has waited on a run queue (ready, no core free),
// from /proc: lateness that the machine, not the UI, caused.
double runQueueWaitMs() {
  FILE* f = std::fopen("/proc/thread-self/schedstat", "r");
  if (!f) return 0.0;
  unsigned long long run = 0, wait = 0, slices = 0;
  const int n = std::fscanf(f, "%llu %llu %llu", &run, &wait, &slices);
  std::fclose(f);
  return n >= 2 ? static_cast<double>(wait) / 1e6 : 0.0;
}

double threadCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

std::uint64_t steadyMs() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

std::atomic<std::uint64_t> g_lastBeatMs{0};
std::atomic<bool> g_done{false};
pthread_t g_uiThread;

[[maybe_unused]] void onDeath() { monkey_log::dumpTail("the process is dying (sanitizer report or crash above)"); }

void onAbort(int) {
  monkey_log::dumpTail("abort");
  signal(SIGABRT, SIG_DFL);
  raise(SIGABRT);
}

// The texts a value edit types: ordinary values, edges, and what a user
// gets wrong (huge, tiny, not numbers).
const char* const kTexts[] = {"0", "1", "-1", "1000", "1e400", "1e-400", "0.001", "42", "abc", "", "nan",
                              "inf", "65536", "99999999999", "2.5", "1e-5", "0,5", " 7 "};

// The keys a random key press sends: the window's shortcuts (not Quit) and
// what moves around a form.
struct Key {
  Qt::Key key;
  Qt::KeyboardModifiers mods;
  const char* name;
};
const Key kKeys[] = {
    {Qt::Key_F5, Qt::NoModifier, "F5"},         {Qt::Key_F5, Qt::ShiftModifier, "Shift+F5"},
    {Qt::Key_F6, Qt::NoModifier, "F6"},         {Qt::Key_F10, Qt::NoModifier, "F10"},
    {Qt::Key_F11, Qt::NoModifier, "F11"},       {Qt::Key_E, Qt::ControlModifier, "Ctrl+E"},
    {Qt::Key_C, Qt::ControlModifier | Qt::ShiftModifier, "Ctrl+Shift+C"},
    {Qt::Key_F, Qt::ControlModifier | Qt::ShiftModifier, "Ctrl+Shift+F"},
    {Qt::Key_B, Qt::ControlModifier | Qt::ShiftModifier, "Ctrl+Shift+B"},
    {Qt::Key_N, Qt::ControlModifier | Qt::ShiftModifier, "Ctrl+Shift+N"},
    {Qt::Key_Escape, Qt::NoModifier, "Esc"},    {Qt::Key_Tab, Qt::NoModifier, "Tab"},
    {Qt::Key_Backtab, Qt::ShiftModifier, "Shift+Tab"},
    {Qt::Key_Return, Qt::NoModifier, "Return"}, {Qt::Key_Space, Qt::NoModifier, "Space"},
    {Qt::Key_Up, Qt::NoModifier, "Up"},         {Qt::Key_Down, Qt::NoModifier, "Down"},
    {Qt::Key_Left, Qt::NoModifier, "Left"},     {Qt::Key_Right, Qt::NoModifier, "Right"},
    {Qt::Key_PageDown, Qt::NoModifier, "PgDown"}, {Qt::Key_Home, Qt::NoModifier, "Home"},
    {Qt::Key_Delete, Qt::NoModifier, "Delete"}, {Qt::Key_Backspace, Qt::NoModifier, "Backspace"},
    {Qt::Key_5, Qt::NoModifier, "5"},           {Qt::Key_Minus, Qt::NoModifier, "-"},
    {Qt::Key_A, Qt::ControlModifier, "Ctrl+A"}, {Qt::Key_Plus, Qt::ControlModifier, "Ctrl++"},
};

QString describe(const QWidget* w) {
  if (!w) return QStringLiteral("(none)");
  QString name = w->objectName();
  if (name.isEmpty()) name = QString::fromLatin1(w->metaObject()->className());
  if (const auto* b = qobject_cast<const QAbstractButton*>(w); b && !b->text().isEmpty())
    name += QStringLiteral(" '%1'").arg(b->text());
  return name;
}

class Monkey : public QObject {
 public:
  Monkey(const Options& o, MainWindow* window) : m_options(o), m_window(window), m_rng(o.seed) {
    m_heartbeat.setTimerType(Qt::PreciseTimer);
    m_heartbeat.setInterval(kBeatMs);
    connect(&m_heartbeat, &QTimer::timeout, this, [this] { beat(); });
    connect(window->part<ExportController>(), &ExportController::exportFinished, this,
            [this](bool ok) {
              ++(ok ? m_exportsDone : m_exportsFailed);
              m_maxExportSlice = std::max(m_maxExportSlice, m_window->part<ExportController>()->lastLongestSliceMs());
            });
  }

  void start() {
    m_clock.start();
    m_lastBeat = m_clock.nsecsElapsed();
    m_lastWait = runQueueWaitMs();
    m_lastCpu = threadCpuMs();
    g_lastBeatMs = steadyMs();
    m_heartbeat.start();
    m_probe.start();
    QTimer::singleShot(0, this, [this] { tick(); });
  }

  int result() const { return m_result; }

 private:
  static constexpr int kBeatMs = 20;
  // A stop ends each run with an evaluation on its test set: under a
  // sanitizer, on a busy machine, a comparison on Fashion-MNIST takes a while.
  static constexpr double kStopLimitS = 180.0;

  double seconds() const { return static_cast<double>(m_clock.elapsed()) / 1000.0; }
  std::uint64_t below(std::uint64_t n) { return n == 0 ? 0 : m_rng() % n; }
  bool chance(double p) { return std::uniform_real_distribution<double>(0.0, 1.0)(m_rng) < p; }

  void log(const QString& what) {
    ++m_actions;
    monkey_log::add(QStringLiteral("t=%1s #%2 %3").arg(seconds(), 0, 'f', 3).arg(m_actions).arg(what).toStdString());
  }

  // Lateness of a 20 ms timer, less the time the thread waited for a core
  // (on a shared machine most of a late tick can be that). Exports count
  // like anything else: they draw a chart per event-loop turn and write on a
  // worker thread.
  void beat() {
    const qint64 now = m_clock.nsecsElapsed();
    const double wait = runQueueWaitMs();
    const double cpu = threadCpuMs();
    const double late = std::max(0.0, static_cast<double>(now - m_lastBeat) / 1e6 - kBeatMs);
    const double used = cpu - m_lastCpu;
    const double notWaiting = std::max(0.0, late - (wait - m_lastWait));
    const double own = m_options.lateMeasure == "cpu" ? std::min(late, used) : notWaiting;
    m_lastBeat = now;
    ++m_beatsSinceAction;
    m_lastWait = wait;
    m_lastCpu = cpu;
    g_lastBeatMs = steadyMs();
    // The action that ran in this interval: the last one logged at the
    // previous beat, or one since.
    const std::string during = m_duringAction;
    m_duringAction = monkey_log::last();
    m_maxLate = std::max(m_maxLate, late);
    if (m_options.profileMs > 0 && late > 50)
      std::printf("test_monkey: profile: t=%.3fs beat %.1f ms late, %.1f ms of CPU, after %s\n",
                  static_cast<double>(steadyMs() % 1000000) / 1e3, late, used, m_duringAction.c_str());
    // Reported apart too (counted all the same): the beats while an export ran.
    const bool exporting = m_window->part<ExportController>()->exporting();
    if (exporting || m_wasExporting) m_maxExportOwn = std::max(m_maxExportOwn, own);
    m_wasExporting = exporting;
    if (own > m_maxOwn) {
      m_maxOwn = own;
      m_worstAction = during + " / " + m_duringAction;
    }
    m_maxNotWaiting = std::max(m_maxNotWaiting, notWaiting);
    if (m_options.maxBlockedMs > 0 && notWaiting > m_options.maxBlockedMs) {
      ++m_blockedCount;
      std::fprintf(stderr, "test_monkey: event loop %.0f ms late, %.0f ms of it not waiting for a core (%.0f ms on the "
                   "UI thread's CPU) at t=%.2f s, during: %s / %s\n", late, notWaiting, used, seconds(),
                   during.c_str(), m_duringAction.c_str());
    }
    if (own > m_options.maxLateMs) {
      ++m_lateCount;
      std::fprintf(stderr, "test_monkey: event loop %.0f ms late (%.0f ms of it waiting for a core, %.0f ms on the "
                   "UI thread's CPU) at t=%.2f s, during: %s / %s\n", late, late - own, used, seconds(),
                   during.c_str(), m_duringAction.c_str());
    }
    if (seconds() - m_lastReport >= 10.0) {
      m_lastReport = seconds();
      std::printf("test_monkey: t=%.0f s, %d actions, %d runs, worst lateness %.0f ms (own %.0f ms)\n", seconds(),
                  m_actions, m_window->part<RunStore>()->count(), m_maxLate, m_maxOwn);
      std::fflush(stdout);
    }
  }

  // One action, then the next is scheduled; the next is scheduled first
  // because an action may open a modal dialog whose loop runs until a later
  // action closes it.
  void tick() {
    if (m_finished) return;
    if (!m_finishing && seconds() >= m_options.seconds) m_finishing = true;
    // One action per heartbeat at most: a late beat is then one action's
    // cost, not the sum of two a few milliseconds apart (no user clicks
    // twice within a 20 ms beat). Waiting draws no random number, so a seed
    // still gives the same actions.
    if (!m_finishing && m_beatsSinceAction == 0) {
      QTimer::singleShot(1, this, [this] { tick(); });
      return;
    }
    QTimer::singleShot(m_finishing ? 50 : static_cast<int>(below(40)), this, [this] { tick(); });
    if (m_finishing) {
      finishStep();
      return;
    }
    // The hang check's own test: PL_MONKEY_SELFTEST_HANG=1 blocks the UI
    // thread after a second, longer than --hang-s.
    if (m_selfTestHang && seconds() > 1.0) {
      m_selfTestHang = false;
      log(QStringLiteral("self-test: the UI thread sleeps"));
      std::this_thread::sleep_for(std::chrono::duration<double>(m_options.hangSeconds + 30.0));
    }
    if (QWidget* popup = QApplication::activePopupWidget()) {
      onPopup(popup);
      return;
    }
    if (QWidget* modal = QApplication::activeModalWidget()) {
      onModal(modal);
      return;
    }
    if (!m_window->isVisible()) {
      log(QStringLiteral("the window was closed: shown again"));
      m_window->show();
      return;
    }
    m_beatsSinceAction = 0;
    randomAction();
  }

  void randomAction() {
    const std::uint64_t r = below(100);
    if (r < 24) return click(randomWidget(topLevel()), Qt::LeftButton, false);
    if (r < 27) return click(randomWidget(topLevel()), Qt::RightButton, false);
    if (r < 31) return click(randomWidget(topLevel()), Qt::LeftButton, true);
    if (r < 44) return key(nullptr);
    if (r < 54) return edit(topLevel());
    if (r < 57) return wheel(randomWidget(topLevel()));
    if (r < 60) return drag(randomWidget(topLevel()));
    if (r < 69) return menuAction();
    if (r < 82) return runControl();
    if (r < 86) return lesson();
    if (r < 89) return toggle(QStringLiteral("actionPresentation"));
    if (r < 91) return exportRuns();
    if (r < 95) return switchTab();
    if (r < 97) return resize();
    return closeOtherWindow();
  }

  // The window, or (sometimes) another visible top-level (the format
  // explorer, a floating dock).
  QWidget* topLevel() {
    QList<QWidget*> others;
    for (QWidget* w : QApplication::topLevelWidgets())
      if (w != m_window && w->isVisible() && !(w->windowFlags() & (Qt::Popup | Qt::ToolTip)) &&
          !qobject_cast<QMenu*>(w))
        others << w;
    if (!others.isEmpty() && chance(0.2)) return others[static_cast<int>(below(others.size()))];
    return m_window;
  }

  // A visible, enabled widget inside `root` (root itself when it has none).
  QWidget* randomWidget(QWidget* root) {
    QList<QWidget*> all;
    for (QWidget* w : root->findChildren<QWidget*>())
      if (w->isVisible() && w->isEnabled() && w->width() > 0 && w->height() > 0) all << w;
    if (all.isEmpty()) return root;
    return all[static_cast<int>(below(all.size()))];
  }

  QPoint randomPoint(QWidget* w) {
    return QPoint(static_cast<int>(below(std::max(1, w->width()))), static_cast<int>(below(std::max(1, w->height()))));
  }

  void click(QWidget* w, Qt::MouseButton button, bool twice) {
    QPointer<QWidget> target = w;
    const QPoint at = randomPoint(w);
    log(QStringLiteral("%1 %2 at %3,%4")
            .arg(twice ? QStringLiteral("double-click") : button == Qt::RightButton ? QStringLiteral("right-click")
                                                                                    : QStringLiteral("click"),
                 describe(w))
            .arg(at.x())
            .arg(at.y()));
    QTest::mousePress(w, button, Qt::NoModifier, at);
    if (!target) return;
    QTest::mouseRelease(target, button, Qt::NoModifier, at);
    if (twice && target) QTest::mouseDClick(target, button, Qt::NoModifier, at);
  }

  void key(QWidget* inside) {
    const Key& k = kKeys[below(std::size(kKeys))];
    QWidget* to = QApplication::focusWidget();
    if (!to || (inside && !inside->isAncestorOf(to) && to != inside)) to = inside ? inside : m_window;
    log(QStringLiteral("key %1 to %2").arg(QLatin1String(k.name), describe(to)));
    QTest::keyClick(to, k.key, k.mods);
  }

  void wheel(QWidget* w) {
    const QPoint at = randomPoint(w);
    const int delta = chance(0.5) ? 120 : -120;
    log(QStringLiteral("wheel %1 on %2").arg(delta).arg(describe(w)));
    QWheelEvent e(QPointF(at), QPointF(w->mapToGlobal(at)), QPoint(), QPoint(0, delta), Qt::NoButton, Qt::NoModifier,
                  Qt::NoScrollPhase, false);
    QApplication::sendEvent(w, &e);
  }

  void drag(QWidget* w) {
    QPointer<QWidget> target = w;
    const QPoint from = randomPoint(w), to = randomPoint(w);
    log(QStringLiteral("drag on %1 %2,%3 -> %4,%5").arg(describe(w)).arg(from.x()).arg(from.y()).arg(to.x()).arg(to.y()));
    QTest::mousePress(w, Qt::LeftButton, Qt::NoModifier, from);
    if (!target) return;
    QTest::mouseMove(target, (from + to) / 2);
    if (!target) return;
    QTest::mouseMove(target, to);
    if (!target) return;
    QTest::mouseRelease(target, Qt::LeftButton, Qt::NoModifier, to);
  }

  // A value typed, chosen or toggled in a random control inside `root`.
  void edit(QWidget* root) {
    QList<QWidget*> controls;
    for (QWidget* w : root->findChildren<QWidget*>())
      if (w->isVisible() && w->isEnabled() &&
          (qobject_cast<QAbstractSpinBox*>(w) || qobject_cast<QComboBox*>(w) || qobject_cast<QCheckBox*>(w) ||
           qobject_cast<QAbstractSlider*>(w) || (qobject_cast<QLineEdit*>(w) && !qobject_cast<QAbstractSpinBox*>(w->parentWidget()) &&
                                                 !qobject_cast<QComboBox*>(w->parentWidget()))))
        controls << w;
    if (controls.isEmpty()) return key(root);
    QWidget* w = controls[static_cast<int>(below(controls.size()))];
    if (auto* combo = qobject_cast<QComboBox*>(w)) {
      if (combo->count() == 0) return;
      const int i = static_cast<int>(below(combo->count()));
      log(QStringLiteral("choose %1 in %2").arg(combo->itemText(i), describe(w)));
      // As a user's choice: the signal a click in the list sends.
      combo->setCurrentIndex(i);
      if (QPointer<QComboBox> c = combo) emit c->activated(i);
    } else if (auto* box = qobject_cast<QCheckBox*>(w)) {
      log(QStringLiteral("toggle %1").arg(describe(w)));
      box->click();
    } else if (auto* slider = qobject_cast<QAbstractSlider*>(w)) {
      const int v = slider->minimum() + static_cast<int>(below(static_cast<std::uint64_t>(slider->maximum() - slider->minimum()) + 1));
      log(QStringLiteral("slide %1 to %2").arg(describe(w)).arg(v));
      slider->setValue(v);
    } else {
      const QString text = QString::fromLatin1(kTexts[below(std::size(kTexts))]);
      log(QStringLiteral("type '%1' into %2").arg(text, describe(w)));
      QPointer<QWidget> target = w;
      w->setFocus(Qt::OtherFocusReason);
      QTest::keyClick(w, Qt::Key_A, Qt::ControlModifier);
      if (!target) return;
      QTest::keyClicks(w, text);
      if (!target) return;
      QTest::keyClick(w, chance(0.7) ? Qt::Key_Return : Qt::Key_Tab);
    }
  }

  // Every enabled action of the menu bar's menus (and their submenus),
  // but Quit: the budget decides when the window closes.
  void collect(QMenu* menu, QList<QAction*>& out) {
    for (QAction* a : menu->actions()) {
      if (a->menu()) collect(a->menu(), out);
      else if (!a->isSeparator() && a->isEnabled() && a->shortcut() != QKeySequence(QKeySequence::Quit)) out << a;
    }
  }

  void menuAction() {
    QList<QAction*> actions;
    for (QAction* a : m_window->menuBar()->actions())
      if (a->menu()) collect(a->menu(), actions);
    if (actions.isEmpty()) return;
    QAction* a = actions[static_cast<int>(below(actions.size()))];
    log(QStringLiteral("menu %1").arg(a->text()));
    a->trigger();
  }

  void runControl() {
    RunLauncher* run = m_window->part<RunLauncher>();
    switch (below(7)) {
      case 0: log(QStringLiteral("start")); run->startRun(); break;
      case 1: log(QStringLiteral("stop")); run->stopRun(); break;
      case 2: log(QStringLiteral("pause/resume")); run->togglePause(); break;
      case 3: log(QStringLiteral("step")); run->stepOnce(); break;
      case 4: {
        QStringList recipes = SetupPanel::recipes();
        QStringList chosen;
        for (const QString& r : recipes)
          if (chance(0.4)) chosen << r;
        if (chosen.isEmpty()) chosen << recipes.front();
        log(QStringLiteral("compare %1").arg(chosen.join(QLatin1Char(','))));
        run->startComparison(chosen);
        break;
      }
      case 5: log(QStringLiteral("compare dialog")); run->openCompareDialog(); break;
      default: log(QStringLiteral("start, then stop at once")); run->startRun(); run->stopRun(); break;
    }
  }

  void lesson() {
    LectureMenu* menu = m_window->findChild<LectureMenu*>();
    if (!menu || menu->presetActions().isEmpty()) return;
    QAction* a = menu->presetActions()[static_cast<int>(below(menu->presetActions().size()))];
    log(QStringLiteral("lesson %1").arg(a->data().toString()));
    a->trigger();
    if (chance(0.6)) {
      log(QStringLiteral("lesson start"));
      m_window->part<LessonController>()->start(chance(0.2));
    }
  }

  void toggle(const QString& action) {
    if (auto* a = m_window->findChild<QAction*>(action)) {
      log(QStringLiteral("toggle %1").arg(action));
      a->trigger();
    }
  }

  void exportRuns() {
    log(QStringLiteral("export dialog"));
    m_window->part<ExportController>()->openDialog();
  }

  void switchTab() {
    QList<QTabBar*> bars;
    for (QTabBar* b : m_window->findChildren<QTabBar*>())
      if (b->isVisible() && b->count() > 0) bars << b;
    if (bars.isEmpty()) return;
    QTabBar* b = bars[static_cast<int>(below(bars.size()))];
    const int i = static_cast<int>(below(b->count()));
    log(QStringLiteral("tab %1").arg(b->tabText(i)));
    b->setCurrentIndex(i);
  }

  void resize() {
    const QRect screen = m_window->screen() ? m_window->screen()->availableGeometry() : QRect(0, 0, 1280, 720);
    const int w = 400 + static_cast<int>(below(static_cast<std::uint64_t>(std::max(1, screen.width() - 400))));
    const int h = 300 + static_cast<int>(below(static_cast<std::uint64_t>(std::max(1, screen.height() - 300))));
    log(QStringLiteral("resize %1x%2").arg(w).arg(h));
    m_window->resize(w, h);
  }

  void closeOtherWindow() {
    for (QWidget* w : QApplication::topLevelWidgets())
      if (w != m_window && w->isVisible() && !qobject_cast<QMenu*>(w) && !(w->windowFlags() & Qt::ToolTip)) {
        log(QStringLiteral("close %1").arg(describe(w)));
        w->close();
        return;
      }
    toggle(QStringLiteral("actionFormatExplorer"));
  }

  // A menu or a combo's list: pick, click in it, or Escape.
  void onPopup(QWidget* popup) {
    const std::uint64_t r = below(10);
    if (r < 4) {
      log(QStringLiteral("Esc on popup %1").arg(describe(popup)));
      QTest::keyClick(popup, Qt::Key_Escape);
    } else if (auto* menu = qobject_cast<QMenu*>(popup); menu && r < 8) {
      QList<QAction*> actions;
      for (QAction* a : menu->actions())
        if (a->isEnabled() && !a->isSeparator() && !a->menu()) actions << a;
      if (actions.isEmpty()) return QTest::keyClick(popup, Qt::Key_Escape);
      QAction* a = actions[static_cast<int>(below(actions.size()))];
      log(QStringLiteral("popup menu %1").arg(a->text()));
      menu->hide();
      a->trigger();
    } else if (r < 8) {
      click(randomWidget(popup), Qt::LeftButton, false);
    } else {
      key(popup);
    }
  }

  // A modal dialog: act inside it, or close it (a file dialog at once: the
  // monkey does not walk the file system).
  void onModal(QWidget* modal) {
    if (modal != m_modal) {
      m_modal = modal;
      m_modalSince = seconds();
    }
    auto* dialog = qobject_cast<QDialog*>(modal);
    const bool fileDialog = qobject_cast<QFileDialog*>(modal) != nullptr;
    if (fileDialog || chance(0.25) || seconds() - m_modalSince > 5.0) {
      if (auto* box = qobject_cast<QMessageBox*>(modal); box && !box->buttons().isEmpty()) {
        QAbstractButton* b = box->buttons()[static_cast<int>(below(box->buttons().size()))];
        log(QStringLiteral("message box '%1': %2").arg(box->windowTitle(), b->text()));
        b->click();
      } else if (dialog && !fileDialog && chance(0.5)) {
        log(QStringLiteral("accept %1").arg(describe(modal)));
        dialog->accept();
      } else if (dialog) {
        log(QStringLiteral("reject %1").arg(describe(modal)));
        dialog->reject();
      } else {
        log(QStringLiteral("close %1").arg(describe(modal)));
        modal->close();
      }
      return;
    }
    const std::uint64_t r = below(10);
    if (r < 5) click(randomWidget(modal), Qt::LeftButton, false);
    else if (r < 8) edit(modal);
    else key(modal);
  }

  // The budget is spent: close what is open, stop the runs, wait for the
  // engine to end, then report.
  void finishStep() {
    if (QWidget* popup = QApplication::activePopupWidget()) {
      popup->close();
      return;
    }
    if (QWidget* modal = QApplication::activeModalWidget()) {
      if (auto* d = qobject_cast<QDialog*>(modal)) d->reject();
      else modal->close();
      return;
    }
    TrainingController* controller = m_window->part<TrainingController>();
    if (!m_stopRequested) {
      m_stopRequested = true;
      m_stopAt = seconds();
      log(QStringLiteral("budget spent: stop"));
      if (controller->paused()) m_window->part<RunLauncher>()->togglePause();
      m_window->part<RunLauncher>()->stopRun();
      return;
    }
    if (controller->active() && seconds() - m_stopAt < kStopLimitS) return;
    m_finished = true;
    m_heartbeat.stop();
    m_probe.stop();
    report(controller->active());
  }

  void report(bool stillActive) {
    const LatencyProbe::Stats s = m_probe.stats();
    std::printf("test_monkey: seed %llu, %.0f s, %d actions, %d runs\n", static_cast<unsigned long long>(m_options.seed),
                m_options.seconds, m_actions, m_window->part<RunStore>()->count());
    std::printf("test_monkey: heartbeat lateness max %.1f ms, of it the UI's own (not waiting for a core) %.1f ms, "
                "during: %s\n", m_maxLate, m_maxOwn, m_worstAction.c_str());
    std::printf("test_monkey: measured as %s; the largest lateness not waiting for a core %.1f ms\n",
                m_options.lateMeasure == "cpu" ? "the UI thread's CPU time" : "lateness not waiting for a core",
                m_maxNotWaiting);
    std::printf("test_monkey: %d exports written (%d failed), their longest GUI-thread slice %.1f ms; the UI's own "
                "lateness while one ran up to %.1f ms\n", m_exportsDone, m_exportsFailed, m_maxExportSlice, m_maxExportOwn);
    std::printf("test_monkey: latency probe: %s\n", qPrintable(LatencyProbe::describe(s)));
    m_result = 0;
    if (stillActive) {
      std::printf("test_monkey: FAIL: the engine did not stop within %.0f s of Stop\n", kStopLimitS);
      m_result = 1;
    }
    if (m_lateCount > 0) {
      std::printf("test_monkey: FAIL: the event loop was late by more than %.0f ms %d times (worst %.0f ms)\n",
                  m_options.maxLateMs, m_lateCount, m_maxOwn);
      m_result = 1;
    }
    if (m_blockedCount > 0) {
      std::printf("test_monkey: FAIL: the event loop was late by more than %.0f ms, not waiting for a core, %d times "
                  "(worst %.0f ms)\n", m_options.maxBlockedMs, m_blockedCount, m_maxNotWaiting);
      m_result = 1;
    }
    if (m_result != 0) monkey_log::dumpTail("failure");
    else std::printf("test_monkey: PASS\n");
    std::fflush(stdout);
    QApplication::exit(m_result);
  }

  Options m_options;
  MainWindow* m_window;
  std::mt19937_64 m_rng;
  QElapsedTimer m_clock;
  QTimer m_heartbeat;
  LatencyProbe m_probe;
  qint64 m_lastBeat = 0;
  int m_beatsSinceAction = 1;  // heartbeats since the last random action
  double m_lastWait = 0.0;
  double m_lastCpu = 0.0;
  std::string m_duringAction;
  double m_maxLate = 0.0, m_maxOwn = 0.0, m_lastReport = 0.0;
  std::string m_worstAction;
  int m_lateCount = 0, m_blockedCount = 0;
  double m_maxNotWaiting = 0.0;
  int m_actions = 0;
  int m_exportsDone = 0, m_exportsFailed = 0;
  bool m_wasExporting = false;
  double m_maxExportOwn = 0.0, m_maxExportSlice = 0.0;
  QWidget* m_modal = nullptr;
  double m_modalSince = 0.0;
  bool m_finishing = false, m_finished = false, m_stopRequested = false;
  double m_stopAt = 0.0;
  int m_result = 1;
  bool m_selfTestHang = qEnvironmentVariableIntValue("PL_MONKEY_SELFTEST_HANG") == 1;
};

// --profile-ms: the UI thread's CPU time of each event, nested events
// included in their parents' time, printed when over the limit.
class ProfilingApplication : public QApplication {
 public:
  ProfilingApplication(int& argc, char** argv, double limitMs) : QApplication(argc, argv), m_limitMs(limitMs) {}
  bool notify(QObject* receiver, QEvent* event) override {
    if (m_limitMs <= 0.0) return QApplication::notify(receiver, event);
    // The receiver may be gone afterwards (a deferred delete): named first.
    const int type = event->type();
    const char* cls = receiver->metaObject()->className();
    QString name = receiver->objectName();
    for (QObject* p = receiver->parent(); name.isEmpty() && p; p = p->parent())
      if (!p->objectName().isEmpty()) name = QStringLiteral("in ") + p->objectName();
    const double t0 = threadCpuMs();
    ++m_depth;
    const bool r = QApplication::notify(receiver, event);
    --m_depth;
    const double ms = threadCpuMs() - t0;
    if (ms >= m_limitMs)
      std::printf("test_monkey: profile: t=%.3fs %6.1f ms depth %d event %d to %s '%s'\n",
                  static_cast<double>(steadyMs() % 1000000) / 1e3, ms, m_depth, type, cls, qPrintable(name));
    return r;
  }

 private:
  static double threadCpuMs() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
  }
  double m_limitMs;
  int m_depth = 0;
};

// No heartbeat for the hang limit: print the action log, then signal the UI
// thread so the sanitizer (or the default handler's core) shows its stack.
void watchdog(double hangSeconds) {
  while (!g_done.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    const std::uint64_t last = g_lastBeatMs.load();
    if (last != 0 && steadyMs() - last > static_cast<std::uint64_t>(hangSeconds * 1000.0)) {
      std::fprintf(stderr, "test_monkey: FAIL: HANG: the event loop has not run for %.0f s; the UI thread's stack follows\n",
                   hangSeconds);
      monkey_log::dumpTail("hang");
      pthread_kill(g_uiThread, SIGSEGV);
      std::this_thread::sleep_for(std::chrono::seconds(10));
      std::_Exit(3);
    }
  }
}

// Qt's warnings go to the action log (QTest's "not accepted" lines are the
// monkey clicking where nothing listens), not to the terminal.
void messageHandler(QtMsgType type, const QMessageLogContext&, const QString& text) {
  if (type == QtFatalMsg) {
    std::fprintf(stderr, "qFatal: %s\n", qPrintable(text));
    monkey_log::dumpTail("qFatal");
    std::abort();
  }
  if (text.contains(QLatin1String("not accepted by receiving widget"))) return;
  monkey_log::add(std::string("  qt: ") + text.left(200).toStdString());
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parseOptions(argc, argv);
  std::printf("test_monkey: seed %llu, %.0f s (replay: test_monkey --seconds %.0f --seed %llu)\n",
              static_cast<unsigned long long>(options.seed), options.seconds, options.seconds,
              static_cast<unsigned long long>(options.seed));
  std::fflush(stdout);
  monkey_log::setHeader("seed " + std::to_string(options.seed));
#ifdef PL_MONKEY_ASAN
  __sanitizer_set_death_callback(onDeath);
#endif
  signal(SIGABRT, onAbort);
  // A home of its own: exports, run folders and file dialogs stay in it.
  QTemporaryDir home;
  if (!home.isValid()) return 2;
  qputenv("HOME", home.path().toLocal8Bit());
  qputenv("XDG_DATA_HOME", QDir(home.path()).filePath(QStringLiteral("data")).toLocal8Bit());
  qputenv("XDG_CONFIG_HOME", QDir(home.path()).filePath(QStringLiteral("config")).toLocal8Bit());
  // And its working folder: the monkey types folder names ("42", "inf") into
  // the export dialog, and a relative one landed in the caller's checkout.
  QDir::setCurrent(home.path());
  // Qt's own file dialogs (widgets the monkey can close), never a desktop's.
  qputenv("QT_QPA_PLATFORMTHEME", "");
  QApplication::setAttribute(Qt::AA_DontUseNativeDialogs);
  if (qEnvironmentVariableIsEmpty("DISPLAY") && qEnvironmentVariableIsEmpty("WAYLAND_DISPLAY") &&
      qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM"))
    qputenv("QT_QPA_PLATFORM", "offscreen");
  ProfilingApplication app(argc, argv, options.profileMs);
  qInstallMessageHandler(messageHandler);
  g_uiThread = pthread_self();
  int rc = 0;
  {
    auto window = std::make_unique<MainWindow>();
    // Spirals trains fast under a sanitizer; the monkey may choose another.
    engine::RunConfig base = window->part<PrecisionTableController>()->nextRunConfig();
    base.dataset = "spirals";
    base.steps = 3000;
    window->part<PrecisionTableController>()->setBaseConfig(base);
    window->fitToScreen();
    window->show();
    Monkey monkey(options, window.get());
    std::thread dog(watchdog, options.hangSeconds);
    monkey.start();
    rc = app.exec();
    window->part<TrainingController>()->shutdown();
    window.reset();
    g_done = true;
    dog.join();
  }
  return rc;
}
