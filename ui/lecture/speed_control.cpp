// SpeedControl: a labelled combo of step rates.
#include "lecture/speed_control.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>

#include <cmath>

SpeedControl::SpeedControl(QWidget* parent) : QWidget(parent) {
  setObjectName(QStringLiteral("speedControl"));
  m_combo = new QComboBox(this);
  m_combo->setObjectName(QStringLiteral("speedCombo"));
  for (double r : rates())
    m_combo->addItem(r == 0 ? tr("as fast as possible") : r == 1 ? tr("1 step/s") : tr("%1 steps/s").arg(r), r);
  m_combo->setToolTip(tr("Steps per second of each run: slow enough for a class to watch a lesson unfold. "
                         "Applies to the running runs at once and to the next ones."));
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(6, 0, 6, 0);
  auto* label = new QLabel(tr("Speed"), this);
  label->setBuddy(m_combo);
  layout->addWidget(label);
  layout->addWidget(m_combo);
  connect(m_combo, &QComboBox::currentIndexChanged, this, [this] { emit rateChanged(rate()); });
}

const QVector<double>& SpeedControl::rates() {
  static const QVector<double> r = {0, 1, 2, 5, 10, 20, 50, 100};
  return r;
}

double SpeedControl::rate() const { return m_combo->currentData().toDouble(); }

void SpeedControl::setRate(double stepsPerSecond) {
  int best = 0;
  if (stepsPerSecond > 0) {
    // Nearest on a log scale among the finite rates.
    double bestDistance = 1e300;
    for (int i = 1; i < rates().size(); ++i) {
      const double d = std::fabs(std::log(rates()[i] / stepsPerSecond));
      if (d < bestDistance) {
        bestDistance = d;
        best = i;
      }
    }
  }
  m_combo->setCurrentIndex(best);
}
