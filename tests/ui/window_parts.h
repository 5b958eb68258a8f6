// The parts of MainWindow the UI tests reach through MainWindow::part<T>():
// every feature and widget type, complete, so findChild can cast to it.
#pragma once

#include <QAction>
#include <QDockWidget>
#include <QStatusBar>
#include <QTabWidget>

#include "charts/chart_area.h"
#include "compare/compare_view.h"
#include "export/export_controller.h"
#include "export/exporter.h"
#include "inspect/fault_injector.h"
#include "inspect/step_inspector.h"
#include "lecture/lecture_menu.h"
#include "lecture/lecture_panel.h"
#include "lecture/lesson_controller.h"
#include "lecture/preset.h"
#include "lecture/speed_control.h"
#include "main_window.h"
#include "panels/history_controller.h"
#include "panels/history_panel.h"
#include "panels/precision_table.h"
#include "panels/precision_table_controller.h"
#include "panels/runs_list.h"
#include "panels/setup_panel.h"
#include "panels/status_readouts.h"
#include "session/dataset_cache.h"
#include "session/run_launcher.h"
#include "session/run_store.h"
#include "session/training_controller.h"
#include "session/user_messages.h"
