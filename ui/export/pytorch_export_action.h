// PytorchExportAction: File > Export to PyTorch… for the selected run — the engine's export-pytorch on a worker thread, then what did not translate.
#pragma once

#include <QObject>
#include <QPointer>
#include <QString>
#include <QStringList>

class QAction;
class QMessageBox;
class QThread;
class QWidget;
class RunStore;
class RunsList;

// GUI thread only. The export (engine/bridge/pytorch_export.h: it loads the
// run's data set and writes a folder) runs on a thread of its own, so the
// window keeps drawing; destroying this object waits for it.
class PytorchExportAction : public QObject {
  Q_OBJECT

 public:
  // `action` (File > Export to PyTorch…) exports the runs list's current
  // run, or the newest run when none is selected.
  PytorchExportAction(QAction* action, RunStore* store, RunsList* runs, QWidget* window);
  ~PytorchExportAction() override;

  // Exports store run `storeId` into `outDir`; with `outDir` empty, asks
  // for a folder (or takes setOutputDirectory's). False, and a message box
  // saying why, when it cannot start: no such run, a run without a folder,
  // an export still running.
  bool exportRun(int storeId, const QString& outDir = {});
  // Exports go into DIR/pytorch-<folder>-<run> without asking (tests, and
  // the folder the dialog chose last).
  void setOutputDirectory(const QString& dir) { m_outputDir = dir; }
  bool exporting() const { return m_thread != nullptr; }
  // The message box of the last export's result (or refusal), while open.
  QMessageBox* resultBox() const;

 signals:
  // The export ended: the script written (empty on failure), what did not
  // translate, or the one-line error.
  void exportFinished(bool ok, const QString& script, const QStringList& untranslated, const QString& error);

 private:
  void trigger();
  void finish(bool ok, const QString& script, const QStringList& untranslated, const QString& error);
  void show(const QString& title, const QString& text, const QString& details, bool warning);

  RunStore* m_store;
  RunsList* m_runs;
  QWidget* m_window;
  QString m_outputDir;
  QThread* m_thread = nullptr;
  QPointer<QMessageBox> m_box;
};
