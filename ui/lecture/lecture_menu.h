// LectureMenu: the menu bar's Lecture menu — every built-in preset by its
// title (engine::builtin_presets(): the training lessons, then the solver
// lessons under a "Solver" heading), "Open preset file…", and the lecture
// tools the window adds below.
#pragma once

#include <QMenu>

// GUI thread only.
class LectureMenu : public QMenu {
  Q_OBJECT

 public:
  explicit LectureMenu(QWidget* parent = nullptr);

  // The training presets' actions, in builtin_presets() order; data() is the name.
  QList<QAction*> presetActions() const { return m_presets; }
  QAction* openFileAction() const { return m_openFile; }

 signals:
  // A built-in preset's name, or a file path the user picked.
  void presetChosen(const QString& nameOrFile);

 private:
  QList<QAction*> m_presets;
  QAction* m_openFile = nullptr;
};
