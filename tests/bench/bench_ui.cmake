# bench_ui: chart redraw with 3 runs x 100,000 steps (decimated refresh +
# render), against the same points undecimated. Needs the Qt UI.
if(TARGET ui)
  add_executable(bench_ui ${CMAKE_CURRENT_LIST_DIR}/bench_ui.cpp)
  target_link_libraries(bench_ui PRIVATE ui benchmark::benchmark)
endif()
