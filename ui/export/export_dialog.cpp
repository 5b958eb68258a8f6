// ExportDialog: folder, runs and formats.
#include "export/export_dialog.h"

#include <QCheckBox>
#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPainter>
#include <QPushButton>
#include <QVBoxLayout>

#include "session/run_store.h"

namespace {

QIcon swatch(const QColor& colour) {
  QPixmap pixmap(12, 12);
  pixmap.fill(colour);
  return QIcon(pixmap);
}

}  // namespace

ExportDialog::ExportDialog(const RunStore& store, const QString& dir, QWidget* parent) : QDialog(parent) {
  setObjectName(QStringLiteral("exportDialog"));
  setWindowTitle(tr("Export runs and charts"));

  m_dir = new QLineEdit(dir, this);
  m_dir->setObjectName(QStringLiteral("exportDirEdit"));
  m_dir->setMinimumWidth(fontMetrics().horizontalAdvance(QLatin1Char('x')) * 48);
  auto* browse = new QPushButton(tr("Browse…"), this);
  connect(browse, &QPushButton::clicked, this, [this] {
    const QString d = QFileDialog::getExistingDirectory(this, tr("Export to folder"), m_dir->text());
    if (!d.isEmpty()) m_dir->setText(d);
  });
  auto* dirRow = new QHBoxLayout;
  dirRow->addWidget(m_dir, 1);
  dirRow->addWidget(browse);

  m_runs = new QListWidget(this);
  m_runs->setObjectName(QStringLiteral("exportRunList"));
  for (int id = 0; id < store.count(); ++id) {
    const RunData& r = store.run(id);
    auto* item = new QListWidgetItem(swatch(r.colour),
                                     tr("%1 — %2, %3 steps, %4")
                                         .arg(r.name, r.recipe)
                                         .arg(r.steps.empty() ? 0 : r.steps.back().step)
                                         .arg(QString::fromLatin1(engine::run_state_name(r.state))),
                                     m_runs);
    item->setData(Qt::UserRole, id);
    item->setFlags(Qt::ItemIsEnabled | Qt::ItemIsUserCheckable);
    item->setCheckState(r.visible ? Qt::Checked : Qt::Unchecked);
  }
  m_runs->setMinimumHeight(std::min(8, std::max(3, store.count())) * (m_runs->sizeHintForRow(0) + 2) + 6);
  connect(m_runs, &QListWidget::itemChanged, this, &ExportDialog::updateOk);

  auto* what = new QGroupBox(tr("Write"), this);
  m_csv = new QCheckBox(tr("CSV: steps, evals, events, grads, summary (.csv) and config.json"), what);
  m_csv->setObjectName(QStringLiteral("exportCsvCheck"));
  m_png = new QCheckBox(tr("Each chart as PNG"), what);
  m_png->setObjectName(QStringLiteral("exportPngCheck"));
  m_svg = new QCheckBox(tr("Each chart as SVG"), what);
  m_svg->setObjectName(QStringLiteral("exportSvgCheck"));
  for (QCheckBox* c : {m_csv, m_png, m_svg}) {
    c->setChecked(true);
    connect(c, &QCheckBox::toggled, this, &ExportDialog::updateOk);
  }
  auto* whatLayout = new QVBoxLayout(what);
  whatLayout->addWidget(m_csv);
  whatLayout->addWidget(m_png);
  whatLayout->addWidget(m_svg);

  m_buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
  m_buttons->button(QDialogButtonBox::Ok)->setText(tr("Export"));
  connect(m_buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(m_buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  connect(m_dir, &QLineEdit::textChanged, this, &ExportDialog::updateOk);

  auto* form = new QFormLayout;
  form->addRow(tr("Folder"), dirRow);
  form->addRow(tr("Runs"), m_runs);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(form);
  layout->addWidget(what);
  auto* note = new QLabel(tr("Files are written to a temporary name and renamed: a failed export leaves no "
                             "half-written file. Existing files of the same name are replaced."),
                          this);
  note->setWordWrap(true);
  note->setForegroundRole(QPalette::PlaceholderText);
  layout->addWidget(note);
  layout->addWidget(m_buttons);
  updateOk();
}

QString ExportDialog::directory() const { return m_dir->text().trimmed(); }

void ExportDialog::setDirectory(const QString& dir) { m_dir->setText(dir); }

QVector<int> ExportDialog::runs() const {
  QVector<int> ids;
  for (int i = 0; i < m_runs->count(); ++i)
    if (m_runs->item(i)->checkState() == Qt::Checked) ids << m_runs->item(i)->data(Qt::UserRole).toInt();
  return ids;
}

bool ExportDialog::csv() const { return m_csv->isChecked(); }
bool ExportDialog::png() const { return m_png->isChecked(); }
bool ExportDialog::svg() const { return m_svg->isChecked(); }

void ExportDialog::updateOk() {
  const bool anything = (csv() && !runs().isEmpty()) || png() || svg();
  m_buttons->button(QDialogButtonBox::Ok)->setEnabled(anything && !directory().isEmpty());
}
