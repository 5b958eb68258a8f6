# tests/ui: widgets under the offscreen platform (no display needed).
pl_add_test(test_main_window
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_main_window.cpp
  LIBS ui Qt6::Test
  LABELS ui
  ENV QT_QPA_PLATFORM=offscreen
  TIMEOUT 120)
