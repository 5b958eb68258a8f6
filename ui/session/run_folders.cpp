// RunFolders: listing, sizing, deleting and reopening run folders.
#include "session/run_folders.h"

#include <QDir>
#include <QDirIterator>
#include <QFileInfo>
#include <QRegularExpression>
#include <QStandardPaths>

#include <algorithm>
#include <exception>
#include <stdexcept>

#include "charts/chart_style.h"
#include "session/run_store.h"
#include "journal/journal.h"

namespace run_folders {

namespace {

const QString kStamp = QStringLiteral("yyyyMMdd-HHmmss");

QDateTime dateOf(const QFileInfo& info) {
  const QDateTime d = QDateTime::fromString(info.fileName().left(kStamp.size()), kStamp);
  return d.isValid() ? d : info.lastModified();
}

// What the folder holds after its time stamp: the name it was given.
QString namePart(const QString& folder) {
  static const QRegularExpression stamp(QStringLiteral("^\\d{8}-\\d{6}-"));
  QString s = folder;
  s.remove(stamp);
  return s;
}

engine::RunState stateOf(const std::string& status) {
  if (status == "finished") return engine::RunState::Finished;
  if (status == "failed") return engine::RunState::Failed;
  // stopped, interrupted, and a run still being written elsewhere: what it
  // took so far, no longer moving here.
  return engine::RunState::Stopped;
}

}  // namespace

QString root() {
  return QDir(QStandardPaths::writableLocation(QStandardPaths::GenericDataLocation))
      .filePath(QStringLiteral("precision-lab/runs"));
}

QString safeName(const QString& name) {
  QString out;
  for (const QChar c : name) {
    const bool keep = (c >= QLatin1Char('a') && c <= QLatin1Char('z')) || (c >= QLatin1Char('A') && c <= QLatin1Char('Z')) ||
                      (c >= QLatin1Char('0') && c <= QLatin1Char('9')) || c == QLatin1Char('.') ||
                      c == QLatin1Char('_') || c == QLatin1Char('-');
    if (keep)
      out += c;
    else if (!out.endsWith(QLatin1Char('-')))
      out += QLatin1Char('-');
  }
  while (out.startsWith(QLatin1Char('-')) || out.startsWith(QLatin1Char('.'))) out.remove(0, 1);
  while (out.endsWith(QLatin1Char('-'))) out.chop(1);
  out.truncate(64);
  return out.isEmpty() ? QStringLiteral("run") : out;
}

QString newFolder(const QString& parent, const QString& name, const QDateTime& when) {
  const QString base = when.toString(kStamp) + QLatin1Char('-') + safeName(name);
  const QDir dir(parent);
  QString candidate = base;
  for (int n = 2; dir.exists(candidate); ++n) candidate = QStringLiteral("%1-%2").arg(base).arg(n);
  return dir.filePath(candidate);
}

QVector<PastRun> list(const QString& parent) {
  QVector<PastRun> out;
  const QFileInfoList folders = QDir(parent).entryInfoList(QDir::Dirs | QDir::NoDotAndDotDot | QDir::NoSymLinks);
  for (const QFileInfo& info : folders) {
    const QDir d(info.absoluteFilePath());
    if (!d.exists(QStringLiteral("status.json")) && !d.exists(QStringLiteral("runs.json"))) continue;
    PastRun p;
    p.dir = info.absoluteFilePath();
    p.folder = info.fileName();
    p.date = dateOf(info);
    p.label = namePart(p.folder);
    try {
      const engine::JournalContents j = engine::read_journal_status(p.dir.toStdString());
      p.status = QString::fromStdString(j.status);
      p.interrupted = j.interrupted;
      p.beingWritten = j.status == "running";  // says running and its lock is held
      for (const engine::JournalEntry& e : j.runs) {
        p.names << QString::fromStdString(e.name);
        const QString recipe = QString::fromStdString(e.config.recipe);
        if (!p.recipes.contains(recipe)) p.recipes << recipe;
        p.steps = std::max<qint64>(p.steps, e.steps);
        p.totalSteps = std::max<qint64>(p.totalSteps, e.total_steps);
        if (p.message.isEmpty() && !e.message.empty()) p.message = QString::fromStdString(e.message);
      }
      if (p.names.size() == 1) p.label = p.names.front();
      else if (p.names.size() > 1) p.label = QObject::tr("%1 (%2 runs)").arg(p.label).arg(p.names.size());
    } catch (const std::exception& e) {
      p.status = QObject::tr("unreadable");
      p.error = QString::fromStdString(e.what());
    }
    out << p;
  }
  std::stable_sort(out.begin(), out.end(), [](const PastRun& a, const PastRun& b) {
    return a.date != b.date ? a.date > b.date : a.folder > b.folder;
  });
  return out;
}

qint64 totalSize(const QString& dir) {
  qint64 bytes = 0;
  QDirIterator it(dir, QDir::Files | QDir::Hidden | QDir::NoSymLinks, QDirIterator::Subdirectories);
  while (it.hasNext()) {
    it.next();
    bytes += it.fileInfo().size();
  }
  return bytes;
}

bool remove(const PastRun& run, QString* error) {
  // Read the lock now, not when the list was made.
  if (QFileInfo::exists(QDir(run.dir).filePath(QStringLiteral("status.json")))) {
    try {
      if (engine::read_journal_status(run.dir.toStdString()).status == "running") {
        if (error) *error = QObject::tr("%1: a run is still writing it").arg(run.dir);
        return false;
      }
    } catch (const std::exception&) {
      // Unreadable: it may go.
    }
  }
  QDir d(run.dir);
  if (!d.exists()) return true;
  if (!d.removeRecursively()) {
    if (error) *error = QObject::tr("%1: cannot be removed").arg(run.dir);
    return false;
  }
  return true;
}

QVector<int> open(RunStore& store, const QString& dir) {
  const engine::JournalContents j = engine::read_journal(dir.toStdString());
  if (j.runs.empty()) throw std::runtime_error(dir.toStdString() + ": the folder holds no runs");
  const QDateTime date = dateOf(QFileInfo(dir));
  const int group = j.runs.size() > 1 ? store.newCompareGroup() : -1;
  QVector<int> ids;
  for (std::size_t i = 0; i < j.runs.size(); ++i) {
    const engine::JournalEntry& e = j.runs[i];
    const engine::RunExport& x = j.exports[i];
    RunData r;
    static_cast<engine::RunHistory&>(r) = x.history;
    r.name = QObject::tr("%1 (%2)").arg(QString::fromStdString(e.name), date.toString(QStringLiteral("MMM d HH:mm")));
    r.recipe = QString::fromStdString(e.config.recipe);
    r.colour = chart_style::runColour(store.count());
    r.config = e.config;
    r.compareGroup = group;
    r.interrupted = e.status == "interrupted" || (j.interrupted && e.status != "finished" && e.status != "failed" &&
                                                   e.status != "stopped");
    r.state = stateOf(e.status);
    r.message = QString::fromStdString(e.message);
    if (r.interrupted && r.message.isEmpty())
      r.message = QObject::tr("interrupted: the app ended without stopping it; its data up to the last second is kept");
    r.totalSteps = e.total_steps;
    // The summary the journal wrote when the run ended; an interrupted run
    // has none and its figures are computed from the history.
    if (!r.interrupted && !r.steps.empty()) r.summary = x.summary;
    r.folder = QFileInfo(dir).absoluteFilePath();
    r.folderRun = static_cast<int>(i);
    r.reopened = true;
    ids << store.addStoredRun(std::move(r));
  }
  return ids;
}

}  // namespace run_folders
