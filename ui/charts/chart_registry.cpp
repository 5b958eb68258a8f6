// The chart registry: PL_LIVE_CHARTS as a list of factories.
#include "charts/chart_registry.h"

const std::vector<ChartFactory>& liveCharts() {
#define PL_LIST_CHART(Name) &make##Name,
  static const std::vector<ChartFactory> factories = {PL_LIVE_CHARTS(PL_LIST_CHART)};
#undef PL_LIST_CHART
  return factories;
}
