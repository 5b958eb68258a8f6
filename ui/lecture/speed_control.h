// SpeedControl: the toolbar's steps-per-second choice (1 to 100, or as fast
// as possible), so a class can watch a 3-second lesson unfold.
#pragma once

#include <QWidget>

class QComboBox;

// GUI thread only.
class SpeedControl : public QWidget {
  Q_OBJECT

 public:
  explicit SpeedControl(QWidget* parent = nullptr);

  // The rates offered, in steps per second; 0 is "as fast as possible".
  static const QVector<double>& rates();
  // Steps per second of each run; 0: as fast as possible.
  double rate() const;
  // Selects the offered rate nearest to `stepsPerSecond` (0: as fast as possible).
  void setRate(double stepsPerSecond);
  QComboBox* combo() const { return m_combo; }

 signals:
  void rateChanged(double stepsPerSecond);

 private:
  QComboBox* m_combo = nullptr;
};
