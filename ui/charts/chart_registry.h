// The Live tab's charts, in the order the chart area makes them, numbers
// them (ChartArea::Metric) and exports them. A new chart is one file that
// defines `ChartTile* make<Name>(ChartHost&, QWidget*)` (a StepChart
// subclass: see accuracy_chart.cpp) and one X(<Name>) line below.
#pragma once

#include <vector>

#include "charts/step_chart.h"

#define PL_LIVE_CHARTS(X) \
  X(LossChart)            \
  X(LossScaleChart)       \
  X(MemoryChart)          \
  X(AccuracyChart)        \
  X(GradientChart)

#define PL_DECLARE_CHART(Name) ChartTile* make##Name(ChartHost& host, QWidget* parent);
PL_LIVE_CHARTS(PL_DECLARE_CHART)
#undef PL_DECLARE_CHART

using ChartFactory = ChartTile* (*)(ChartHost& host, QWidget* parent);
// Every chart's factory, in PL_LIVE_CHARTS order.
const std::vector<ChartFactory>& liveCharts();
