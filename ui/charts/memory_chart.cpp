// MemoryChart: the focus run's stack by category per pixel column (at the
// column's peak step, so every band uses the same steps), the others'
// totals, and every run's device allocation where its backend reports one.
#include "charts/memory_chart.h"

#include <QAreaSeries>
#include <QChart>
#include <QEvent>
#include <QGraphicsSimpleTextItem>
#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QLocale>
#include <QValueAxis>

#include <algorithm>

#include "charts/chart_export.h"
#include "charts/chart_registry.h"
#include "charts/chart_style.h"
#include "charts/live_chart_view.h"
#include "session/run_store.h"

namespace {

// Memory categories, bottom to top (colours: chart_style::memoryColour).
const char* const kCategories[] = {
    QT_TRANSLATE_NOOP("MemoryChart", "weights"),     QT_TRANSLATE_NOOP("MemoryChart", "master"),
    QT_TRANSLATE_NOOP("MemoryChart", "grads"),       QT_TRANSLATE_NOOP("MemoryChart", "optimizer"),
    QT_TRANSLATE_NOOP("MemoryChart", "activations"), QT_TRANSLATE_NOOP("MemoryChart", "workspace"),
};
constexpr int kCategoryCount = 6;
constexpr double kMiB = 1024.0 * 1024.0;
constexpr int kLegendMinWidth = 300;

std::int64_t categoryBytes(const engine::MemoryBytes& m, int c) {
  switch (c) {
    case 0: return m.weights;
    case 1: return m.master;
    case 2: return m.grads;
    case 3: return m.optimizer;
    case 4: return m.activations;
    default: return m.workspace;
  }
}

}  // namespace

struct MemoryChart::Run {
  QLineSeries* total = nullptr;
  ColumnDecimator decimator;
  double max = 0.0;
  // What the backend's allocator held (device_allocated): the device's own
  // figure beside the recipe's accounting. Empty on the CPU backend.
  QLineSeries* device = nullptr;
  ColumnDecimator deviceDecimator;
  double deviceMax = 0.0;
  bool hasDevice = false;
};

MemoryChart::MemoryChart(ChartHost& host, QWidget* parent)
    : StepChart(host, {"memoryChart", "memory", tr("Memory"), tr("MiB"), 0.0, 64.0, "%.1f", {1, 0, 1, 1}}, parent) {
  chart()->legend()->setAlignment(Qt::AlignRight);
  QLineSeries* lower = nullptr;
  for (int c = 0; c < kCategoryCount; ++c) {
    auto* upper = new QLineSeries(this);
    auto* area = new QAreaSeries(upper, lower);
    area->setName(tr(kCategories[c]));
    QColor fill = chart_style::memoryColour(c);
    fill.setAlpha(170);
    area->setBrush(fill);
    area->setPen(QPen(chart_style::memoryColour(c).darker(120), 1));
    attach(area);
    m_upper << upper;
    m_areas << area;
    lower = upper;
  }
  // The CPU's emulation buffers: hatched above the stack, outside it (a
  // device holding the recipe natively has none).
  m_emulationUpper = new QLineSeries(this);
  m_emulationArea = new QAreaSeries(m_emulationUpper, lower);
  m_emulationArea->setName(tr("CPU emulation<br>(not in total)"));
  m_emulationArea->setBrush(QBrush(chart_style::kEmulation, Qt::BDiagPattern));
  m_emulationArea->setPen(QPen(chart_style::kEmulation, 1, Qt::DotLine));
  attach(m_emulationArea);
  addLegendLine(tr("other runs' totals"), Qt::DashLine, 2);
  m_deviceLegend = addLegendLine(tr("device allocation"), Qt::DotLine, 2);
  for (QLegendMarker* mk : chart()->legend()->markers(m_deviceLegend)) mk->setVisible(false);
  m_deviceNote = new QGraphicsSimpleTextItem(chart());
  m_deviceNote->setBrush(chart_style::kNote);
  m_deviceNote->setFont(chart_style::legendFont(chart()));
  m_deviceNote->setVisible(false);
  // The stack is one run's: the exported file says whose.
  view()->setExportStem([this] {
    const int f = m_host.focusRun();
    return f < 0 ? QStringLiteral("memory") : chartFileStem(QStringLiteral("memory ") + m_host.store().run(f).name);
  });
}

MemoryChart::~MemoryChart() {
  for (auto& [id, r] : m_runs) delete r;
}

QXYSeries* MemoryChart::runSeries(int runId, int role) const {
  const auto it = m_runs.find(runId);
  if (it == m_runs.end()) return nullptr;
  return role == 1 ? it->second->device : it->second->total;
}

QAreaSeries* MemoryChart::area(int category) const {
  return category >= 0 && category < m_areas.size() ? m_areas[category] : nullptr;
}

QString MemoryChart::deviceNote() const { return m_deviceNote->isVisible() ? m_deviceNote->text() : QString(); }

void MemoryChart::makeSeries(const RunData& run) {
  auto* r = new Run;
  m_runs[run.id] = r;
  r->total = addLine(run, chart_style::kMemTotalWidth, Qt::DashLine, run.colour, false);
  r->device = addLine(run, chart_style::kMemTotalWidth, Qt::DotLine, run.colour, false);
}

void MemoryChart::showSeries(const RunData& run, bool shown) {
  Run& r = *m_runs.at(run.id);
  setShown(r.total, shown);
  setShown(r.device, shown && r.hasDevice);
}

void MemoryChart::draw(const RunData& run, double x1) {
  Run& s = *m_runs.at(run.id);
  const auto& steps = run.steps;
  const std::int64_t n = static_cast<std::int64_t>(steps.size());
  if (!s.decimator.sameGrid(0, x1, columns())) s.decimator.reset(0, x1, columns());
  s.decimator.feed(n, [&](std::int64_t i) {
    const engine::StepMetrics& m = steps[static_cast<std::size_t>(i)];
    return QPointF(static_cast<double>(m.step), static_cast<double>(m.mem.total()) / kMiB);
  });
  s.total->replace(s.decimator.points());
  s.max = static_cast<double>(run.peak_memory) / kMiB;
  // The device's figure: from the first step on a device, never on the CPU.
  s.hasDevice = n > 0 && steps.back().device_allocated > 0;
  if (!s.hasDevice) return;
  if (!s.deviceDecimator.sameGrid(0, x1, columns())) s.deviceDecimator.reset(0, x1, columns());
  s.deviceDecimator.feed(n, [&](std::int64_t i) {
    const engine::StepMetrics& m = steps[static_cast<std::size_t>(i)];
    const double mib = static_cast<double>(m.device_allocated) / kMiB;
    s.deviceMax = std::max(s.deviceMax, mib);
    return QPointF(static_cast<double>(m.step), mib);
  });
  s.device->replace(s.deviceDecimator.points());
}

void MemoryChart::updateStack(const RunData* run, const ChartFrame& frame) {
  const int id = run ? run->id : -1;
  if (!frame.force && id == m_stackRun && (!run || run->revision == m_stackRevision)) return;
  const double x1 = frame.x1;
  const int width = columns();
  if (id != m_stackRun || !m_peaks.sameGrid(0, x1, width)) m_peaks.reset(0, x1, width, ColumnPicker::MaxScore);
  m_stackRun = id;
  m_stackRevision = run ? run->revision : 0;
  QVector<QList<QPointF>> bands(kCategoryCount);
  QList<QPointF> emulation;  // the stack's top plus the emulation buffers
  m_emulationMax = 0.0;
  if (run && !run->steps.empty()) {
    // Per pixel column the step with the largest total (the peak), so
    // every band uses the same steps and the stack stays consistent.
    const auto& steps = run->steps;
    auto at = [&steps](std::int64_t i) -> const engine::StepMetrics& { return steps[static_cast<std::size_t>(i)]; };
    m_peaks.feed(
        static_cast<std::int64_t>(steps.size()), [&](std::int64_t i) { return static_cast<double>(at(i).step); },
        [](std::int64_t) { return true; }, [&](std::int64_t i) { return static_cast<double>(at(i).mem.total()); });
    for (std::int64_t i : m_peaks.indices()) {
      double sum = 0;
      for (int c = 0; c < kCategoryCount; ++c) {
        sum += static_cast<double>(categoryBytes(at(i).mem, c)) / kMiB;
        bands[c].append(QPointF(static_cast<double>(at(i).step), sum));
      }
      sum += static_cast<double>(at(i).mem.emulation) / kMiB;
      emulation.append(QPointF(static_cast<double>(at(i).step), sum));
      m_emulationMax = std::max(m_emulationMax, sum);
    }
    // One step is a single point: give the band a visible width.
    if (bands[0].size() == 1) {
      for (auto& b : bands) b.append(QPointF(b[0].x() + x1 / width * 2, b[0].y()));
      emulation.append(QPointF(emulation[0].x() + x1 / width * 2, emulation[0].y()));
    }
  }
  for (int c = 0; c < kCategoryCount; ++c) m_upper[c]->replace(bands[c]);
  // Only when there is any: no legend entry for a recipe the CPU runs natively.
  bool anyEmulation = false;
  for (int k = 0; k < emulation.size() && !anyEmulation; ++k)
    anyEmulation = emulation[k].y() > bands[kCategoryCount - 1][k].y();
  m_emulationUpper->replace(anyEmulation ? emulation : QList<QPointF>{});
  for (QLegendMarker* mk : chart()->legend()->markers(m_emulationArea))
    if (mk->isVisible() != anyEmulation) mk->setVisible(anyEmulation);
}

void MemoryChart::finishRanges(const ChartFrame& frame) {
  const RunStore& store = m_host.store();
  const int focus = m_host.focusRun();
  // The focus run's memory is the stack; other runs show their total line.
  bool anyDevice = false;
  for (auto& [id, r] : m_runs) {
    const bool visible = store.run(id).visible;
    if (visible) r->total->setVisible(id != focus);
    // Every run's device line, the focus run's beside its stack.
    setShown(r->device, visible && r->hasDevice);
    anyDevice = anyDevice || (visible && r->hasDevice);
  }
  for (QLegendMarker* mk : chart()->legend()->markers(m_deviceLegend))
    if (mk->isVisible() != anyDevice) mk->setVisible(anyDevice);
  updateStack(focus >= 0 ? &store.run(focus) : nullptr, frame);

  // The GPU's own figure (the bands are the tensors the recipe holds; the
  // device also holds the CUDA context and library workspaces).
  QString note;
  for (int id = 0; id < store.count(); ++id) {
    const RunData& r = store.run(id);
    if (!r.visible || r.steps.empty() || r.steps.back().device_total <= 0) continue;
    const engine::StepMetrics& last = r.steps.back();
    note = tr("GPU memory in use: %1 MiB of %2 GiB (cudaMemGetInfo: the whole device)")
               .arg(static_cast<double>(last.device_used) / kMiB, 0, 'f', 0)
               .arg(static_cast<double>(last.device_total) / (1024.0 * kMiB), 0, 'f', 1);
  }
  if (m_deviceNote->text() != note) m_deviceNote->setText(note);
  // The legend of eight categories beside a narrow chart (a lesson's
  // bottom row at 1280x720) would leave the plot a strip: it shows from
  // this width (double-click enlarges the chart); the tooltip names the
  // categories at any width.
  fitLegend();
  m_deviceNote->setVisible(!note.isEmpty());
  if (m_deviceNote->isVisible()) m_deviceNote->setPos(chart()->plotArea().topLeft() + QPointF(6, 2));

  double max = m_emulationMax;
  for (const auto& [id, r] : m_runs)
    if (store.run(id).visible) max = std::max({max, r->max, r->hasDevice ? r->deviceMax : 0.0});
  if (max > 0 && !zoomed()) {
    const double top = niceCeil(max * 1.1);
    QValueAxis* y = yAxis();
    if (y->max() != top) {
      y->setLabelFormat(top >= 10 ? QStringLiteral("%.0f") : QStringLiteral("%.1f"));
      setAxis(y, 0, top, niceTickInterval(top, 5));
    }
  }
}

void MemoryChart::setPresentation(bool on) {
  StepChart::setPresentation(on);
  QFont font = chart_style::legendFont(chart());
  if (on) font.setPointSizeF(chart_style::presentation::kLegendPt - 2);
  m_deviceNote->setFont(font);
  m_deviceNote->setBrush(on ? chart_style::presentation::kInk : chart_style::kNote);
}

QString MemoryChart::hoverLine(const RunData& run, const engine::StepMetrics& s, double, const QString& who) const {
  const QLocale locale;
  QString t = tr("%1: total %2").arg(who, locale.formattedDataSize(s.mem.total()));
  if (run.id == m_host.focusRun()) {
    QStringList parts;
    for (int c = kCategoryCount - 1; c >= 0; --c)
      parts << QStringLiteral("%1 %2").arg(tr(kCategories[c]), locale.formattedDataSize(categoryBytes(s.mem, c)));
    t += QStringLiteral("<br>&nbsp;&nbsp;") + parts.join(QStringLiteral(", "));
  }
  if (s.device_allocated > 0)
    t += QStringLiteral("<br>&nbsp;&nbsp;") +
         tr("device allocation %1 (the backend's allocator)").arg(locale.formattedDataSize(s.device_allocated));
  if (s.mem.emulation > 0) {
    t += QStringLiteral("<br>&nbsp;&nbsp;") +
         tr("CPU emulation %1 (not in the total: a device has none)").arg(locale.formattedDataSize(s.mem.emulation));
  }
  return t;
}

void MemoryChart::fitLegend() {
  const bool roomy = view()->width() >= kLegendMinWidth;
  if (chart()->legend()->isVisible() != roomy) chart()->legend()->setVisible(roomy);
}

bool MemoryChart::eventFilter(QObject* watched, QEvent* event) {
  if (watched == view() && event->type() == QEvent::Resize) fitLegend();
  return StepChart::eventFilter(watched, event);
}

ChartTile* makeMemoryChart(ChartHost& host, QWidget* parent) { return new MemoryChart(host, parent); }
