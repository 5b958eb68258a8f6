// RunFolders: the app's run folders on disk (docs/ARCHITECTURE.md "Runs on disk") —
// where they live, a new one's name, the list of past runs, their size,
// deleting them, and reopening one into the RunStore.
#pragma once

#include <QDateTime>
#include <QString>
#include <QStringList>
#include <QVector>

class RunStore;

// One past run folder as the History list shows it (read_journal_status:
// status.json and runs.json only, cheap).
struct PastRun {
  QString dir;            // absolute path
  QString folder;         // its name: yyyyMMdd-HHmmss-<name>
  QString label;          // the run's name, or "<name> (N runs)" for a comparison or lesson
  QStringList names;      // every run's name
  QStringList recipes;    // distinct recipes, in run order
  QDateTime date;         // from the folder name (its modification time otherwise)
  QString status;         // the folder's: finished, stopped, failed, interrupted, running
  bool interrupted = false;
  bool beingWritten = false;  // a process holds its lock (this app's live run, or another's)
  qint64 steps = 0;           // the most steps any of its runs took
  qint64 totalSteps = 0;
  QString message;            // the first failure's reason
  QString error;              // one line when the folder could not be read; empty otherwise
};

// GUI thread (any thread for the pure functions; they touch only the disk).
namespace run_folders {

// $XDG_DATA_HOME/precision-lab/runs (QStandardPaths::GenericDataLocation).
QString root();
// The folder name part for a run called `name`: letters, digits, '.', '_'
// and '-' kept, every other run of characters one '-'; "run" when empty.
QString safeName(const QString& name);
// A folder path under `parent` that does not exist yet:
// <yyyyMMdd-HHmmss>-<safeName(name)>, with -2, -3, ... when taken.
QString newFolder(const QString& parent, const QString& name, const QDateTime& when = QDateTime::currentDateTime());

// Every folder under `parent` that looks like a run folder (has a
// status.json or runs.json), newest first. A folder that cannot be read is
// listed with its one-line error; nothing throws.
QVector<PastRun> list(const QString& parent);
// Bytes of every file under `dir`.
qint64 totalSize(const QString& dir);
// Removes a run folder; false (and `error`) when it is being written or
// cannot be removed.
bool remove(const PastRun& run, QString* error);

// Reads the folder (read_journal) and adds each of its runs to `store`:
// history, name, config, summary, and the state from its status; an
// interrupted run is Stopped and marked interrupted. Several runs become
// one compare group. Throws std::runtime_error with one line naming the
// file when the folder cannot be read (nothing added then). Returns the
// store ids.
QVector<int> open(RunStore& store, const QString& dir);

}  // namespace run_folders
