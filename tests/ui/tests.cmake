# tests/ui: widgets under the offscreen platform (no display needed); the
# files mirror ui/ (charts/, compare/, inspect/, lecture/, panels/, session/).
pl_add_test(test_main_window
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_main_window.cpp
  LIBS ui Qt6::Test
  LABELS ui
  ENV QT_QPA_PLATFORM=offscreen
  TIMEOUT 120)
# Live training through the window: short spirals runs, compare, export,
# errors, the command line.
pl_add_test(test_live_training
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_live_training.cpp
  LIBS ui Qt6::Test
  LABELS ui
  ENV QT_QPA_PLATFORM=offscreen
  TIMEOUT 120)
# ui/charts: numbers, axes, legends, zoom, export (records fed, no training).
pl_add_test(test_ui_charts
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/charts/test_charts.cpp
          ${CMAKE_CURRENT_LIST_DIR}/charts/test_step_markers.cpp
          ${CMAKE_CURRENT_LIST_DIR}/charts/test_chart_notes.cpp
  LIBS ui Qt6::Test
  LABELS ui
  ENV QT_QPA_PLATFORM=offscreen
  TIMEOUT 120)
# ui/compare: the summary table's numbers and the small multiples; the
# difference-to-FP32 mode and the recipes' colours and dash patterns.
pl_add_test(test_ui_compare
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/compare/test_compare_view.cpp
          ${CMAKE_CURRENT_LIST_DIR}/compare/test_difference.cpp
  LIBS ui Qt6::Test
  LABELS ui
  ENV QT_QPA_PLATFORM=offscreen
  TIMEOUT 120)
# ui/export: an exported PNG is the whole chart (against the SVG rendered by
# Qt, and the series' colours in its plot area); an export does not hold the
# event loop and its files are complete when it says so.
pl_add_test(test_ui_export
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/export/test_png_export.cpp
          ${CMAKE_CURRENT_LIST_DIR}/export/test_export_async.cpp
  LIBS ui Qt6::Test
  LABELS ui
  ENV QT_QPA_PLATFORM=offscreen
  TIMEOUT 120)
# ui/session and ui/panels: the command line, the run store, the setup
# panel, the precision table's choices per layer kind.
pl_add_test(test_ui_session_panels
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/session/test_command_line.cpp
          ${CMAKE_CURRENT_LIST_DIR}/panels/test_setup_panel.cpp
          ${CMAKE_CURRENT_LIST_DIR}/panels/test_precision_table.cpp
          ${CMAKE_CURRENT_LIST_DIR}/panels/test_status_readouts.cpp
  LIBS ui Qt6::Test
  LABELS ui
  ENV QT_QPA_PLATFORM=offscreen
  TIMEOUT 120)
# --help is checked on the built app, without a display.
add_dependencies(test_ui_session_panels precision-lab)
target_compile_definitions(test_ui_session_panels PRIVATE PL_GUI_BINARY="$<TARGET_FILE:precision-lab>")
# ui/lecture: the Lecture menu and panel, the speed control, the format
# explorer (against engine::inspect, every FP8, FP6, FP4 and E8M0 code), its
# block view (hand-worked MX and NVFP4 blocks, the outlier slider, live
# blocks) and the presentation view.
pl_add_test(test_ui_lecture
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/lecture/test_lecture_mode.cpp
          ${CMAKE_CURRENT_LIST_DIR}/lecture/test_format_explorer.cpp
          ${CMAKE_CURRENT_LIST_DIR}/lecture/test_block_view.cpp
  LIBS ui Qt6::Test
  LABELS ui
  ENV QT_QPA_PLATFORM=offscreen
  TIMEOUT 180)
# ui/session: presentation view and a five-recipe comparison's start do not
# hold the event loop (the UI thread's own time per slice, under 200 ms).
pl_add_test(test_ui_responsive
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/session/test_responsive.cpp
  LIBS ui Qt6::Test
  LABELS ui
  ENV QT_QPA_PLATFORM=offscreen:configfile=${CMAKE_CURRENT_LIST_DIR}/screen_1280x720.json
  TIMEOUT 120)
# ui/inspect: the step inspector (what one Step did, layer by layer).
pl_add_test(test_ui_inspect
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/inspect/test_step_inspector.cpp
  LIBS ui Qt6::Test
  LABELS ui
  ENV QT_QPA_PLATFORM=offscreen
  TIMEOUT 180)
# ui/session run folders: every app run journaled, the History tab (list,
# open, delete, clear, unreadable folders).
pl_add_test(test_ui_run_folders
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/session/test_run_folders.cpp
  LIBS ui Qt6::Test
  LABELS ui
  ENV QT_QPA_PLATFORM=offscreen
  TIMEOUT 180)
# The app under stress: kill -9 of the built app and reopening, closing
# mid-run, ten seconds of random clicks, injected NaN (bounded in time).
pl_add_test(test_ui_robustness
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_robustness.cpp
  LIBS ui Qt6::Test
  LABELS ui
  ENV QT_QPA_PLATFORM=offscreen
  TIMEOUT 180)
add_dependencies(test_ui_robustness precision-lab)
target_compile_definitions(test_ui_robustness PRIVATE PL_GUI_BINARY="$<TARGET_FILE:precision-lab>")
# The window's layout in every state (views, lessons before and after they
# run, presentation view, many runs) on a 1280x720 screen and a 1600x1000
# one, given to the offscreen platform by a screen configuration file.
pl_add_test(test_ui_layout
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_layout.cpp
  LIBS ui Qt6::Test
  LABELS ui
  ENV QT_QPA_PLATFORM=offscreen:configfile=${CMAKE_CURRENT_LIST_DIR}/screen_1280x720.json
  TIMEOUT 900)
add_test(NAME test_ui_layout_1600x1000 COMMAND test_ui_layout --gtest_brief=1)
# The two longest UI tests: ctest starts tests with a higher COST first, so
# on a fresh clone (no timing history) they do not start last and run alone.
set_tests_properties(test_ui_layout PROPERTIES COST 1000)
set_tests_properties(test_ui_layout_1600x1000 PROPERTIES COST 1000 LABELS ui TIMEOUT 900
  WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}
  ENVIRONMENT QT_QPA_PLATFORM=offscreen:configfile=${CMAKE_CURRENT_LIST_DIR}/screen_1600x1000.json)
# ui/samples: the Samples tab (each text run's latest continuation) and the
# text runs' bits per token in the compare table and the status line.
pl_add_test(test_ui_samples
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/samples/test_samples_view.cpp
  LIBS ui Qt6::Test
  LABELS ui
  ENV QT_QPA_PLATFORM=offscreen
  TIMEOUT 120)
# ui/export: File > Export to PyTorch… on a finished run (a short spirals run).
pl_add_test(test_ui_pytorch_export
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/export/test_pytorch_export.cpp
  LIBS ui Qt6::Test
  LABELS ui
  ENV QT_QPA_PLATFORM=offscreen
  TIMEOUT 120)
# ui/solver: the Solver tab against the engine's own solve (n = 64), the
# κ·u wall, Stop, and an n = 1024 solve off the UI thread.
pl_add_test(test_ui_solver
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/solver/test_solver_view.cpp
  LIBS ui Qt6::Test
  LABELS ui
  ENV QT_QPA_PLATFORM=offscreen
  TIMEOUT 300)
