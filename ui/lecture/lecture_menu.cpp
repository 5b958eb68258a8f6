// LectureMenu: one action per built-in preset (training, then solver), and a file chooser.
#include "lecture/lecture_menu.h"

#include <QFileDialog>

#include "lecture/preset.h"

LectureMenu::LectureMenu(QWidget* parent) : QMenu(tr("&Lecture"), parent) {
  setObjectName(QStringLiteral("lectureMenu"));
  setToolTipsVisible(true);
  // The training lessons, then the solver lessons (they open the Solver tab).
  for (const engine::PresetKind kind : {engine::PresetKind::Train, engine::PresetKind::Solve}) {
    if (kind == engine::PresetKind::Solve) addSection(tr("Solver"));
    for (const engine::Preset& p : engine::builtin_presets()) {
      if (p.kind != kind) continue;
      const QString name = QString::fromStdString(p.name);
      QAction* a = addAction(QString::fromStdString(p.title));
      a->setObjectName(QStringLiteral("lecture:") + name);
      a->setData(name);
      a->setToolTip(name);
      connect(a, &QAction::triggered, this, [this, name] { emit presetChosen(name); });
      m_presets << a;
    }
  }
  addSeparator();
  m_openFile = addAction(tr("Open preset file…"));
  m_openFile->setObjectName(QStringLiteral("lectureOpenFile"));
  connect(m_openFile, &QAction::triggered, this, [this] {
    const QString file = QFileDialog::getOpenFileName(parentWidget(), tr("Open a lecture preset"), QString(),
                                                      tr("Lecture presets (*.json);;All files (*)"));
    if (!file.isEmpty()) emit presetChosen(file);
  });
}
