// PytorchExportAction: picks the run and the folder, runs export_pytorch off the GUI thread, shows the result.
#include "export/pytorch_export_action.h"

#include <QAction>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QMessageBox>
#include <QThread>

#include <exception>
#include <string>
#include <vector>

#include "bridge/pytorch_export.h"
#include "panels/runs_list.h"
#include "session/run_store.h"

PytorchExportAction::PytorchExportAction(QAction* action, RunStore* store, RunsList* runs, QWidget* window)
    : QObject(window), m_store(store), m_runs(runs), m_window(window) {
  connect(action, &QAction::triggered, this, &PytorchExportAction::trigger);
}

PytorchExportAction::~PytorchExportAction() {
  if (m_thread) {
    m_thread->wait();
    delete m_thread;
  }
}

QMessageBox* PytorchExportAction::resultBox() const { return m_box.data(); }

void PytorchExportAction::trigger() {
  int id = m_runs ? m_runs->currentRun() : -1;
  if (id < 0 || id >= m_store->count()) id = m_store->count() - 1;
  exportRun(id);
}

bool PytorchExportAction::exportRun(int storeId, const QString& outDir) {
  if (m_thread) {
    show(tr("Export to PyTorch"), tr("An export to PyTorch is still being written."), {}, true);
    return false;
  }
  if (storeId < 0 || storeId >= m_store->count()) {
    show(tr("Export to PyTorch"), tr("There is no run to export: start one first."), {}, true);
    return false;
  }
  const RunData& run = m_store->run(storeId);
  if (run.folder.isEmpty() || run.folderRun < 0) {
    show(tr("Export to PyTorch"),
         tr("Run \"%1\" has no run folder on disk, so its initial weights were not kept.").arg(run.name), {}, true);
    return false;
  }
  QString out = outDir;
  if (out.isEmpty()) {
    const QString name = QStringLiteral("pytorch-%1-%2").arg(QFileInfo(run.folder).fileName()).arg(run.folderRun);
    if (m_outputDir.isEmpty()) {
      const QString parent = QFileDialog::getExistingDirectory(m_window, tr("Export to PyTorch: choose a folder"),
                                                               QDir::homePath());
      if (parent.isEmpty()) return false;
      m_outputDir = parent;
    }
    out = QDir(m_outputDir).filePath(name);
  }
  const std::string folder = run.folder.toStdString(), target = out.toStdString();
  const int folderRun = run.folderRun;
  QPointer<PytorchExportAction> self(this);
  m_thread = QThread::create([self, folder, target, folderRun] {
    bool ok = false;
    QString script, error;
    QStringList untranslated;
    try {
      const engine::PytorchExport r = engine::export_pytorch(folder, target, folderRun);
      script = QString::fromStdString(r.script);
      for (const std::string& u : r.untranslated) untranslated << QString::fromStdString(u);
      ok = true;
    } catch (const std::exception& e) {
      error = QString::fromStdString(e.what());
    }
    // Back on the GUI thread (a queued call; dropped if the window is gone).
    QMetaObject::invokeMethod(
        self.data(), [self, ok, script, untranslated, error] {
          if (self) self->finish(ok, script, untranslated, error);
        },
        Qt::QueuedConnection);
  });
  m_thread->start();
  return true;
}

void PytorchExportAction::finish(bool ok, const QString& script, const QStringList& untranslated,
                                 const QString& error) {
  if (m_thread) {
    m_thread->wait();
    delete m_thread;
    m_thread = nullptr;
  }
  if (!ok) {
    show(tr("Export to PyTorch"), tr("The run could not be exported to PyTorch."), error, true);
  } else {
    QString list;
    if (untranslated.isEmpty()) {
      list = tr("Everything in the recipe has a PyTorch form.");
    } else {
      list = tr("Not translated (PyTorch cannot express it; listed at the top of train.py too):");
      for (const QString& u : untranslated) list += QStringLiteral("\n• ") + u;
    }
    show(tr("Exported to PyTorch"),
         tr("Wrote %1.\nRun it with python3; it writes steps.csv beside it.").arg(QDir::toNativeSeparators(script)),
         list, false);
  }
  emit exportFinished(ok, script, untranslated, error);
}

void PytorchExportAction::show(const QString& title, const QString& text, const QString& details, bool warning) {
  if (m_box) m_box->close();
  auto* box = new QMessageBox(warning ? QMessageBox::Warning : QMessageBox::Information, title, text,
                              QMessageBox::Ok, m_window);
  box->setObjectName(QStringLiteral("pytorchExportResult"));
  box->setInformativeText(details);
  box->setAttribute(Qt::WA_DeleteOnClose);
  box->open();  // not modal to the event loop: the window goes on drawing
  m_box = box;
}
