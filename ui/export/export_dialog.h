// ExportDialog: where to export, which runs, and what — the CSV files of
// a run folder (steps, evals, events, grads, summary, config.json) and every
// chart as PNG and SVG.
#pragma once

#include <QDialog>
#include <QVector>

class QCheckBox;
class QDialogButtonBox;
class QLineEdit;
class QListWidget;
class RunStore;

// GUI thread only.
class ExportDialog : public QDialog {
  Q_OBJECT

 public:
  // Runs listed from the store; the visible (ticked) ones start checked.
  ExportDialog(const RunStore& store, const QString& dir, QWidget* parent = nullptr);

  QString directory() const;
  void setDirectory(const QString& dir);
  QVector<int> runs() const;      // store ids of the checked runs
  bool csv() const;
  bool png() const;
  bool svg() const;

 private:
  void updateOk();

  QLineEdit* m_dir = nullptr;
  QListWidget* m_runs = nullptr;
  QCheckBox* m_csv = nullptr;
  QCheckBox* m_png = nullptr;
  QCheckBox* m_svg = nullptr;
  QDialogButtonBox* m_buttons = nullptr;
};
