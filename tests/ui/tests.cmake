# tests/ui: widgets under the offscreen platform (no display needed).
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
