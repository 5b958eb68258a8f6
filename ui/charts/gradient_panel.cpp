// GradientPanel: histogram series per run, format range zones, fractions.
#include "charts/gradient_panel.h"

#include <QAreaSeries>
#include <QResizeEvent>
#include <QTimer>
#include <QChart>
#include <QComboBox>
#include <QFontMetricsF>
#include <QGraphicsLayout>
#include <QGridLayout>
#include <QLabel>
#include <QLegendMarker>
#include <QLineSeries>
#include <QLocale>
#include <QValueAxis>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <functional>

#include "charts/step_chart.h"
#include "charts/chart_style.h"
#include "charts/decimate.h"
#include "charts/elided_label.h"
#include "charts/number_text.h"
#include "charts/live_chart_view.h"
#include "numeric/block.h"
#include "numeric/format.h"
#include "session/run_store.h"

namespace {

constexpr double kAxisFloor = -70.0;  // FP32's 2^-149 would squash the histogram
constexpr double kAxisCeil = 45.0;

// Rich text (legend entries and labels are HTML): 2 with a superscript.
QString pow2Html(double e) {
  return QStringLiteral("2<sup>%1</sup>").arg(QString::number(e, 'g', 4));
}

// Every fraction a number, however small: "0.0031%", never "<0.01%".
QString percent(double f) { return number_text::percent(f); }

// Plain text: 2^-24.
QString pow2Text(double e) { return QStringLiteral("2^%1").arg(QString::number(e, 'g', 4)); }

// Step outline of a histogram: bin b spans [lo + b, lo + b + 1) in log2|g|.
QList<QPointF> outline(const engine::GradStats& g, double shift, double& yMax, double& xLo, double& xHi) {
  QList<QPointF> pts;
  const double total = g.total > 0 ? static_cast<double>(g.total) : 1.0;
  int first = -1, last = -1;
  for (int b = 0; b < static_cast<int>(g.histogram.size()); ++b)
    if (g.histogram[static_cast<std::size_t>(b)] > 0) {
      if (first < 0) first = b;
      last = b;
    }
  if (first < 0) return pts;
  const double base = g.log2_lo + shift;
  pts.append(QPointF(base + first, 0));
  for (int b = first; b <= last; ++b) {
    const double y = 100.0 * static_cast<double>(g.histogram[static_cast<std::size_t>(b)]) / total;
    pts.append(QPointF(base + b, y));
    pts.append(QPointF(base + b + 1, y));
    yMax = std::max(yMax, y);
  }
  pts.append(QPointF(base + last + 1, 0));
  xLo = std::min(xLo, base + first);
  xHi = std::max(xHi, base + last + 1);
  return pts;
}

}  // namespace

struct GradientPanel::RunHist {
  QLineSeries* unscaled = nullptr;
  QLineSeries* scaled = nullptr;
};

GradientPanel::GradientPanel(RunStore* store, QWidget* parent) : QWidget(parent), m_store(store) {
  setObjectName(QStringLiteral("gradientPanel"));
  auto* chart = new QChart;
  chart->setTitle(tr("Gradients"));
  chart_style::styleChart(chart);

  auto* x = chart_style::makeValueAxis(chart, tr("log2 |gradient|"), QStringLiteral("xAxis"));
  x->setLabelFormat(QStringLiteral("%.0f"));
  x->setTickInterval(8);
  x->setRange(-40, 24);
  chart->addAxis(x, Qt::AlignBottom);
  auto* y = chart_style::makeValueAxis(chart, tr("share (%)"), QStringLiteral("yAxis"));
  y->setLabelFormat(QStringLiteral("%.0f"));
  y->setTickInterval(2);
  y->setRange(0, 10);
  chart->addAxis(y, Qt::AlignLeft);

  auto zone = [chart, x, y](const QString& name, const QColor& colour) {
    auto* upper = new QLineSeries(chart);
    auto* area = new QAreaSeries(upper);
    area->setName(name);
    QColor fill = colour;
    fill.setAlpha(45);
    area->setBrush(fill);
    area->setPen(Qt::NoPen);
    chart->addSeries(area);
    area->attachAxis(x);
    area->attachAxis(y);
    return area;
  };
  m_zoneUnder = zone(tr("flushes to zero"), chart_style::kAlarm);
  m_zoneSub = zone(tr("subnormal"), chart_style::kCaution);
  m_zoneOver = zone(tr("overflows"), chart_style::kAlarm);
  auto line = [chart, x, y](const QColor& colour) {
    auto* l = new QLineSeries;
    l->setPen(QPen(colour, 1.2, Qt::DashLine));
    chart->addSeries(l);
    l->attachAxis(x);
    l->attachAxis(y);
    for (QLegendMarker* m : chart->legend()->markers(l)) m->setVisible(false);
    return l;
  };
  m_lineSub = line(chart_style::kAlarmLine);
  m_lineNormal = line(chart_style::kCautionLine);
  m_lineMax = line(chart_style::kAlarmLine);

  m_view = new LiveChartView(chart, this);
  m_view->setObjectName(QStringLiteral("gradientsChart"));
  m_view->setMinimumSize(chart_style::kMinChartWidth, chart_style::kMinChartHeight - 30);
  m_view->setHoverText([this](const QPointF& v) { return hoverText(v); });

  m_layer = new QComboBox(this);
  m_layer->setObjectName(QStringLiteral("gradientLayerCombo"));
  // Fixed sizes: a combo or label that resizes with its text re-lays out
  // the whole chart grid (measured: 50 ms in the first live frame).
  m_layer->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  m_layer->setMinimumContentsLength(10);
  m_layer->setPlaceholderText(tr("no statistics yet"));
  m_layer->setToolTip(tr("The layer whose weight-gradient histogram is drawn"));
  connect(m_layer, &QComboBox::textActivated, this, [this](const QString& text) {
    m_wantedLayer = text;
    m_signature = 0;
    refresh(m_focus);
  });
  // Plain text (ElidedLabel): a '<' in a number would open a tag in rich
  // text and swallow the words after it. At most two lines (three in
  // presentation view), the rest in its tooltip: a narrow panel keeps its
  // chart.
  m_fractions = new ElidedLabel(this);
  m_fractions->setObjectName(QStringLiteral("gradientFractions"));
  m_fractions->setFullText(tr("Gradient statistics arrive at step 1 and every 100 steps."));
  m_fractions->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Fixed);
  fitFractions();

  // The layer and the line of numbers: side by side on a wide panel, the
  // numbers on a row of their own on a narrow one (fitFooter).
  m_layerLabel = new QLabel(tr("Layer"), this);
  auto* header = new QGridLayout;
  m_footer = header;
  header->setContentsMargins(4, 0, 4, 0);
  header->setHorizontalSpacing(6);
  header->setVerticalSpacing(0);
  header->addWidget(m_layerLabel, 0, 0);
  header->addWidget(m_layer, 0, 1);
  header->addWidget(m_fractions, 0, 2);
  header->setColumnStretch(2, 1);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(2);
  layout->addWidget(m_view, 1);
  layout->addLayout(header);
}

GradientPanel::~GradientPanel() {
  for (auto& [id, h] : m_hists) delete h;  // the series belong to the chart
}

QChart* GradientPanel::chart() const { return m_view->chart(); }

// The line keeps the height of its most lines whatever its text (a label
// that changed height with each statistics step would re-lay out the grid).
void GradientPanel::fitFractions() {
  const int h = m_fractions->maxLines() * m_fractions->fontMetrics().lineSpacing() + 4;
  if (m_fractions->height() != h || m_fractions->minimumHeight() != h) m_fractions->setFixedHeight(h);
}

void GradientPanel::resizeEvent(QResizeEvent* event) {
  QWidget::resizeEvent(event);
  // The zones' legend below a short chart (a lesson's bottom row) would
  // leave its plot a strip; the hover text says which zone is where.
  const bool roomy = m_view->height() >= 180;
  if (chart()->legend()->isVisible() != roomy) chart()->legend()->setVisible(roomy);
  nameZones();
  fitFooter();
  fitFractions();
  // The x ticks depend on the plot's width: drawn again at the new size
  // (refresh() skips an unchanged signature).
  if (m_focus != -2)
    QTimer::singleShot(0, this, [this] {
      m_signature = 0;
      refresh(m_focus);
    });
}

void GradientPanel::fitFooter() {
  // Beside the layer box the numbers need about 60 characters a line.
  const int beside = m_layerLabel->sizeHint().width() + m_layer->sizeHint().width() +
                     60 * m_fractions->fontMetrics().averageCharWidth();
  const bool below = width() < beside;
  const int row = below ? 1 : 0;
  const int column = below ? 0 : 2;
  int r = 0, c = 0, rs = 0, cs = 0;
  m_footer->getItemPosition(m_footer->indexOf(m_fractions), &r, &c, &rs, &cs);
  if (r == row && c == column) return;
  m_footer->removeWidget(m_fractions);
  m_footer->addWidget(m_fractions, row, column, 1, below ? 3 : 1);
}

void GradientPanel::setPresentation(bool on) {
  m_presentation = on;
  chart_style::applyPresentation(chart(), on);
  m_styledSeries = static_cast<int>(chart()->series().size());
  nameZones();
  chart_style::setPresentationFont(m_fractions, on, chart_style::presentation::kLegendPt - 2);
  m_fractions->setMaxLines(on ? 3 : 2);
  chart_style::setPresentationFont(m_layer, on, chart_style::presentation::kLegendPt - 2);
  chart_style::setPresentationFont(m_layerLabel, on, chart_style::presentation::kLegendPt - 2);
  fitFooter();
  fitFractions();
}

QString GradientPanel::layer() const { return m_layer->currentText(); }

void GradientPanel::setLayer(const QString& layer) {
  m_wantedLayer = layer;
  m_signature = 0;
  refresh(m_focus);
}

QLineSeries* GradientPanel::histogram(int runId) const {
  const auto it = m_hists.find(runId);
  return it == m_hists.end() ? nullptr : it->second->unscaled;
}

void GradientPanel::prepareRun(const RunData& run) { histFor(run); }

GradientPanel::RunHist& GradientPanel::histFor(const RunData& r) {
  auto it = m_hists.find(r.id);
  if (it != m_hists.end()) return *it->second;
  QChart* c = chart();
  auto* h = new RunHist;
  auto add = [&](Qt::PenStyle style, double width) {
    auto* s = new QLineSeries(this);
    s->setName(r.name);
    s->setPen(chart_style::linePen(r.colour, width, style));
    s->setVisible(false);
    c->addSeries(s);
    for (QAbstractAxis* a : c->axes()) s->attachAxis(a);
    for (QLegendMarker* m : c->legend()->markers(s)) m->setVisible(false);
    return s;
  };
  h->unscaled = add(Qt::SolidLine, chart_style::kHistogramWidth);
  h->scaled = add(Qt::DashLine, 1.4);
  m_hists.emplace(r.id, h);
  return *h;
}

void GradientPanel::rebuildLayerList(const RunData* focus) {
  QStringList layers;
  if (focus)
    for (const std::string& l : focus->grad_layers()) layers << QString::fromStdString(l);
  QStringList current;
  for (int i = 0; i < m_layer->count(); ++i) current << m_layer->itemText(i);
  if (layers != current) {
    const QSignalBlocker block(m_layer);
    m_layer->clear();
    m_layer->addItems(layers);
  }
  if (layers.isEmpty()) return;
  // The user's layer; else the one whose gradients underflow most (where
  // the format's lesson is), the first on a tie.
  QString want = layers.contains(m_wantedLayer) ? m_wantedLayer : QString();
  if (want.isEmpty()) {
    double most = -1.0;
    for (const QString& l : layers) {
      const engine::GradStats* g = focus->latest_grad(l.toStdString());
      const double u = g ? g->underflow_unscaled : 0.0;
      if (u > most) most = u, want = l;
    }
  }
  if (m_layer->currentText() != want) {
    const QSignalBlocker block(m_layer);
    m_layer->setCurrentText(want);
  }
}

void GradientPanel::refresh(int focusRun) {
  if (m_presentation && static_cast<int>(chart()->series().size()) != m_styledSeries) {
    chart_style::applyPresentation(chart(), true);
    m_styledSeries = static_cast<int>(chart()->series().size());
  }
  m_focus = focusRun;
  const RunData* focus = focusRun >= 0 && focusRun < m_store->count() ? &m_store->run(focusRun) : nullptr;
  // Signature of what the drawing depends on: skip the work when unchanged.
  std::uint64_t sig = 1469598103934665603ull;
  auto mix = [&sig](std::uint64_t v) { sig = (sig ^ v) * 1099511628211ull; };
  mix(static_cast<std::uint64_t>(focusRun + 2));
  mix(qHash(m_wantedLayer));
  for (int id = 0; id < m_store->count(); ++id) {
    const RunData& r = m_store->run(id);
    mix(r.visible ? r.grads.size() + 1 : 0);
  }
  if (sig == m_signature) return;
  m_signature = sig;

  rebuildLayerList(focus);
  const std::string layer = m_layer->currentText().toStdString();
  QChart* c = chart();
  double yMax = 0, xLo = 1e9, xHi = -1e9;
  for (int id = 0; id < m_store->count(); ++id) {
    const RunData& r = m_store->run(id);
    const engine::GradStats* g = r.visible && !layer.empty() ? r.latest_grad(layer) : nullptr;
    const auto it = m_hists.find(id);
    if (!g) {
      if (it != m_hists.end()) {
        it->second->unscaled->setVisible(false);
        it->second->scaled->setVisible(false);
      }
      continue;
    }
    RunHist& h = histFor(r);
    if (!h.unscaled->isVisible()) {
      h.unscaled->setVisible(true);
      // A series shown again gets its legend marker back: keep it out.
      for (QLegendMarker* m : c->legend()->markers(h.unscaled)) m->setVisible(false);
    }
    h.unscaled->replace(outline(*g, 0.0, yMax, xLo, xHi));
    // The same values as the GEMMs saw them: multiplied by the loss scale,
    // i.e. shifted right by log2(scale) bins.
    const double shift = std::log2(r.loss_scale_at(g->step));
    if (h.scaled->isVisible() != (shift != 0.0)) {
      h.scaled->setVisible(shift != 0.0);
      for (QLegendMarker* m : c->legend()->markers(h.scaled)) m->setVisible(false);
    }
    h.scaled->replace(shift != 0.0 ? outline(*g, shift, yMax, xLo, xHi) : QList<QPointF>{});
  }

  // The focus run's layer format decides the range drawn.
  const engine::GradStats* fg = focus && !layer.empty() ? focus->latest_grad(layer) : nullptr;
  if (!fg && !layer.empty())
    for (int id = 0; id < m_store->count() && !fg; ++id)
      if (m_store->run(id).visible) fg = m_store->run(id).latest_grad(layer);
  m_range = {};
  QString text;
  if (fg) {
    const std::optional<engine::Format> f = engine::parse_format(fg->format);
    // A block format has no fixed range to draw: every block of 32 (16)
    // values has its own scale. Its fractions come from quantizing the
    // exact gradient in that format.
    const bool block = f && engine::is_block_format(*f);
    if (f && !block) {
      const engine::FormatInfo& info = engine::format_info(*f);
      m_range.format = QString::fromLatin1(info.name);
      m_range.minSubnormal = std::log2(info.min_subnormal);
      m_range.minNormal = std::log2(info.min_normal);
      m_range.maxFinite = std::log2(info.max);
    }
    const double scale = focus ? focus->loss_scale_at(fg->step) : 1.0;
    const QString format = m_range.format.isEmpty() ? QString::fromStdString(fg->format) : m_range.format;
    const double zeros = fg->total > 0 ? static_cast<double>(fg->zeros) / static_cast<double>(fg->total) : 0.0;
    QStringList parts;
    parts << tr("%1 · %2 grads · step %3 · scale %4")
                 .arg(QString::fromStdString(fg->layer), format, QLocale().toString(static_cast<qint64>(fg->step)),
                      focus && focus->scalesLoss() ? pow2Text(std::log2(scale)) : tr("none"));
    if (block) parts << tr("no fixed range: each block of %1 values has its own scale").arg(engine::block_info(*f).block);
    parts << tr("flush to zero %1 → %2 scaled").arg(percent(fg->underflow_unscaled), percent(fg->underflow_scaled));
    parts << tr("subnormal %1 → %2").arg(percent(fg->subnormal_unscaled), percent(fg->subnormal_scaled));
    parts << tr("overflow %1 → %2").arg(percent(fg->overflow_unscaled), percent(fg->overflow_scaled));
    parts << tr("exact zeros %1").arg(percent(zeros));
    // What the format did, against an FP32 pass of the same batch.
    parts << tr("error vs FP32: output %1, grad %2")
                 .arg(number_text::significant(fg->output_error, 2), number_text::significant(fg->grad_error, 2));
    if (fg->shadow) parts << tr("exact (FP32 shadow) histogram");
    text = parts.join(QStringLiteral(" · "));
  } else {
    const std::int64_t every = focus ? focus->config.stats_every : engine::RunConfig{}.stats_every;
    text = every > 0 ? tr("Gradient statistics arrive at step 1 and every %1 steps.").arg(every)
                     : tr("Gradient statistics are off for this run (stats_every 0).");
  }
  m_fractions->setFullText(text);

  // Axis: the histograms and the format's boundaries, within reason.
  if (!m_range.format.isEmpty())
    for (double b : {m_range.minSubnormal, m_range.minNormal, m_range.maxFinite})
      if (b >= kAxisFloor && b <= kAxisCeil) xLo = std::min(xLo, b), xHi = std::max(xHi, b);
  if (xLo > xHi) xLo = -40, xHi = 24;
  const double x0 = std::max(kAxisFloor, std::floor(xLo) - 2), x1 = std::min(kAxisCeil, std::ceil(xHi) + 2);
  const double yTop = niceCeil(std::max(1.0, yMax * 1.1));
  auto* xa = qobject_cast<QValueAxis*>(c->axes(Qt::Horizontal).first());
  auto* ya = qobject_cast<QValueAxis*>(c->axes(Qt::Vertical).first());
  // Only real changes: each one re-lays out the chart.
  // As many ticks as whole labels fit the plot's width ("-40" at most).
  const double label = QFontMetricsF(xa->labelsFont()).horizontalAdvance(QStringLiteral("-40")) * 1.6 + 8;
  const int ticks = std::clamp(static_cast<int>(c->plotArea().width() / label), 2, 10);
  setAxis(xa, x0, x1, powerOfTwoTickInterval(x1 - x0, ticks));
  setAxis(ya, 0, yTop, niceTickInterval(yTop, 5));
  // Ticks of 0.2 % under a 1 % top (an empty chart: a reopened run keeps
  // no histograms) need their decimal.
  const QString yFormat = yTop < 5 ? QStringLiteral("%.1f") : QStringLiteral("%.0f");
  if (ya->labelFormat() != yFormat) ya->setLabelFormat(yFormat);
  updateZones(x0, x1, yTop);
}

void GradientPanel::updateZones(double x0, double x1, double yTop) {
  auto band = [yTop](QAreaSeries* a, double from, double to) {
    QList<QPointF> pts;
    if (to > from) pts = {QPointF(from, yTop), QPointF(to, yTop)};
    a->upperSeries()->replace(pts);
  };
  auto vline = [yTop, x0, x1](QLineSeries* l, double x) {
    if (x >= x0 && x <= x1)
      l->replace({QPointF(x, 0), QPointF(x, yTop)});
    else
      l->replace(QList<QPointF>{});
  };
  if (m_range.format.isEmpty()) {
    for (QAreaSeries* a : {m_zoneUnder, m_zoneSub, m_zoneOver}) {
      a->upperSeries()->replace(QList<QPointF>{});
      for (QLegendMarker* m : chart()->legend()->markers(a)) m->setVisible(false);
    }
    for (QLineSeries* l : {m_lineSub, m_lineNormal, m_lineMax}) l->replace(QList<QPointF>{});
    return;
  }
  // Values below half the smallest subnormal round to zero; the zones are
  // drawn at the representable boundaries themselves.
  band(m_zoneUnder, x0, std::min(m_range.minSubnormal, x1));
  band(m_zoneSub, std::max(m_range.minSubnormal, x0), std::min(m_range.minNormal, x1));
  band(m_zoneOver, std::max(m_range.maxFinite, x0), x1);
  vline(m_lineSub, m_range.minSubnormal);
  vline(m_lineNormal, m_range.minNormal);
  vline(m_lineMax, m_range.maxFinite);
  nameZones();
  // Zones off the axis (FP32's range) get no legend entry.
  auto legend = [this](QAreaSeries* a, bool shown) {
    for (QLegendMarker* m : chart()->legend()->markers(a))
      if (m->isVisible() != shown) m->setVisible(shown);
  };
  legend(m_zoneUnder, m_range.minSubnormal > x0);
  legend(m_zoneSub, m_range.minNormal > x0 && m_range.minSubnormal < x1);
  legend(m_zoneOver, m_range.maxFinite < x1);
}

void GradientPanel::nameZones() {
  if (m_range.format.isEmpty()) return;
  // Legend entries are rich text: '<' would open a tag. Renamed only on a
  // change of format or of room (a rename re-lays out the legend and the
  // chart). A narrow chart's legend (side by side in presentation view, a
  // lesson's bottom row) gets the short names, which fit whole: the
  // boundaries are the dashed lines, and the line below the chart and the
  // hover text name the format.
  const bool roomy = m_view->width() >= (m_presentation ? 900 : 560);
  // Presentation type, a size smaller where the chart is narrow.
  if (m_presentation) {
    QFont f = chart()->legend()->font();
    const double pt = chart_style::presentation::kLegendPt - (roomy ? 0 : 4);
    if (f.pointSizeF() != pt) {
      f.setPointSizeF(pt);
      chart()->legend()->setFont(f);
    }
  }
  const QLocale locale;
  auto rename = [](QAreaSeries* a, const QString& name) {
    if (a->name() != name) a->setName(name);
  };
  if (roomy) {
    rename(m_zoneUnder,
           tr("%1: flushes to 0 below %2").arg(m_range.format.toHtmlEscaped(), pow2Html(m_range.minSubnormal)));
    rename(m_zoneSub, tr("subnormal below %1").arg(pow2Html(m_range.minNormal)));
    rename(m_zoneOver, tr("overflows above %1").arg(locale.toString(std::exp2(m_range.maxFinite), 'g', 5)));
  } else {
    rename(m_zoneUnder, tr("to zero"));
    rename(m_zoneSub, tr("subnormal"));
    rename(m_zoneOver, tr("overflow"));
  }
}

QString GradientPanel::hoverText(const QPointF& value) const {
  const std::string layer = m_layer->currentText().toStdString();
  if (layer.empty()) return {};
  const int bin = static_cast<int>(std::floor(value.x()));
  QStringList lines;
  lines << tr("|g| in [%1, %2)").arg(pow2Html(bin), pow2Html(bin + 1));
  for (int id = 0; id < m_store->count(); ++id) {
    const RunData& r = m_store->run(id);
    const engine::GradStats* g = r.visible ? r.latest_grad(layer) : nullptr;
    if (!g || g->total <= 0) continue;
    const double total = static_cast<double>(g->total);
    auto share = [&](int b) {
      const int i = b - g->log2_lo;
      if (i < 0 || i >= static_cast<int>(g->histogram.size())) return 0.0;
      return static_cast<double>(g->histogram[static_cast<std::size_t>(i)]) / total;
    };
    const int shift = static_cast<int>(std::lround(std::log2(r.loss_scale_at(g->step))));
    QString t = tr("<span style='color:%1'>■</span> %2 (step %3): %4 unscaled")
                    .arg(r.colour.name(), r.name.toHtmlEscaped())
                    .arg(g->step)
                    .arg(percent(share(bin)));
    if (shift != 0) t += tr(", %1 as scaled").arg(percent(share(bin - shift)));
    lines << t;
  }
  if (!m_range.format.isEmpty()) {
    QString where;
    if (value.x() < m_range.minSubnormal) where = tr("%1: flushes to zero here").arg(m_range.format);
    else if (value.x() < m_range.minNormal) where = tr("%1: subnormal here (fewer mantissa bits)").arg(m_range.format);
    else if (value.x() > m_range.maxFinite) where = tr("%1: overflows here").arg(m_range.format);
    else where = tr("%1: normal range").arg(m_range.format);
    lines << where;
  }
  return lines.join(QStringLiteral("<br>"));
}
