// ChangeMarkers: reads each run's new events once per frame and puts a
// marker on every step chart for each live change among them.
#include "session/change_markers.h"

#include <QValueAxis>

#include "charts/chart_area.h"
#include "charts/step_markers.h"
#include "numeric/format.h"
#include "session/run_store.h"

ChangeMarkers::ChangeMarkers(RunStore* store, ChartArea* charts, QObject* parent)
    : QObject(parent), m_store(store), m_charts(charts) {
  // Every chart over steps; the gradient histogram's x axis is log2|g|.
  const int gradients = m_charts->chartIndex(QStringLiteral("gradients"));
  for (int m = 0; m < m_charts->chartCount(); ++m) {
    QValueAxis* x = m_charts->xAxis(m);
    m_markers.push_back(m != gradients && x && m_charts->chart(m) ? new StepMarkers(m_charts->chart(m), x, this)
                                                                   : nullptr);
  }
  connect(m_store, &RunStore::appended, this, &ChangeMarkers::scan);
  connect(m_store, &RunStore::runAdded, this, &ChangeMarkers::scan);
  connect(m_store, &RunStore::runChanged, this, [this](int id) {
    for (StepMarkers* s : m_markers)
      if (s) s->setGroupVisible(id, m_store->run(id).visible);
  });
}

StepMarkers* ChangeMarkers::markersOf(int m) const {
  return m >= 0 && m < static_cast<int>(m_markers.size()) ? m_markers[static_cast<std::size_t>(m)] : nullptr;
}

void ChangeMarkers::scan() {
  for (int id = 0; id < m_store->count(); ++id) {
    const RunData& r = m_store->run(id);
    std::size_t& seen = m_seen[id];
    for (; seen < r.events.size(); ++seen) {
      const engine::Event& e = r.events[seen];
      // The live changes the engine records with their step: a layer's
      // precision. (A loss-scaler change is applied at a step boundary
      // too, but no event records which one yet.)
      if (e.kind != engine::EventKind::PrecisionChange) continue;
      QString text = QStringLiteral("%1 → %2").arg(QString::fromStdString(e.layer),
                                                   QString::fromLatin1(engine::format_name(e.precision.compute)));
      // With several runs on the charts the label says whose change it is.
      if (m_store->count() > 1) text = QStringLiteral("%1: %2").arg(r.name, text);
      for (StepMarkers* s : m_markers) {
        if (!s) continue;
        s->addMarker(markerStep(e.step), text, r.colour, id);
        s->setGroupVisible(id, r.visible);
      }
    }
  }
}
