# Precompiled headers: the system headers most files of a target parse (Qt's
# widget and chart headers, GoogleTest, the standard library), parsed once
# per target instead of once per file. Only system headers: a change to a
# project header never rebuilds a precompiled header.

set(PL_PCH_STD <algorithm> <cmath> <cstdint> <functional> <map> <memory> <optional> <span>
    <stdexcept> <string> <string_view> <utility> <vector>)
set(PL_PCH_QT <QObject> <QString> <QStringList> <QVector> <QList> <QLocale> <QTimer> <QWidget>
    <QLabel> <QVBoxLayout> <QHBoxLayout> <QComboBox> <QPushButton> <QAction> <QPainter>
    <QChart> <QValueAxis> <QLineSeries>)
set(PL_PCH_TEST <gtest/gtest.h>)

# The UI library.
function(pl_pch_ui target)
  target_precompile_headers(${target} PRIVATE ${PL_PCH_STD} ${PL_PCH_QT})
endfunction()

# The engine's test executables reuse one precompiled header, built by a
# small object library compiled with the same flags. The UI tests take none:
# measured, their time goes to code generation of the test bodies, and a
# precompiled header of Qt, QtTest and GoogleTest saved nothing.
function(pl_pch_test_targets)
  if(NOT TARGET pl_pch_engine_tests)
    add_library(pl_pch_engine_tests OBJECT ${PROJECT_SOURCE_DIR}/tests/support/pch.cpp)
    target_link_libraries(pl_pch_engine_tests PRIVATE GTest::gtest OpenMP::OpenMP_CXX)
    target_compile_options(pl_pch_engine_tests PRIVATE ${PL_TEST_SANITIZE_OPTIONS})
    target_precompile_headers(pl_pch_engine_tests PRIVATE ${PL_PCH_STD} ${PL_PCH_TEST})
  endif()
endfunction()

function(pl_pch_test target libs)
  if(NOT "ui" IN_LIST libs)
    target_precompile_headers(${target} REUSE_FROM pl_pch_engine_tests)
  endif()
endfunction()
