// CompareDialog: a checkable list of the recipe presets.
#include "compare/compare_dialog.h"

#include <QDialogButtonBox>
#include <QLabel>
#include <QListWidget>
#include <QPushButton>
#include <QVBoxLayout>

#include "panels/setup_panel.h"

QString CompareDialog::describeRecipe(const QString& r) {
  // What engine/amp/recipe.cpp makes of each name, in one line.
  if (r == QLatin1String("fp32")) return tr("FP32 everywhere: the reference");
  if (r == QLatin1String("fp16")) return tr("FP16 everywhere, FP16 weights, no loss scaling");
  if (r == QLatin1String("mixed-fp16")) return tr("FP16 matmuls, FP32 master weights, dynamic loss scaling");
  if (r == QLatin1String("mixed-bf16")) return tr("BF16 matmuls, FP32 master weights, no loss scaling");
  if (r == QLatin1String("fp8")) return tr("E4M3 forward / E5M2 gradients, FP32 master, dynamic scaling");
  if (r == QLatin1String("mxfp8"))
    return tr("MXFP8 matmuls (blocks of 32 E4M3 values, one power-of-two scale each), FP32 master, no loss scaling");
  if (r == QLatin1String("mxfp4"))
    return tr("MXFP4 matmuls (blocks of 32 E2M1 values, one power-of-two scale each), FP32 master, no loss scaling");
  if (r == QLatin1String("nvfp4"))
    return tr("NVFP4 matmuls (blocks of 16 E2M1 values, an E4M3 scale each), stochastic rounding of gradients, "
              "FP32 master, no loss scaling");
  if (r == QLatin1String("custom")) return tr("FP32, changed layer by layer in the precision table");
  return {};
}

QStringList CompareDialog::defaultRecipes() {
  return {QStringLiteral("fp32"), QStringLiteral("fp16"), QStringLiteral("mixed-fp16")};
}

CompareDialog::CompareDialog(const QStringList& checked, int seed, QWidget* parent) : QDialog(parent) {
  setObjectName(QStringLiteral("compareDialog"));
  setWindowTitle(tr("Compare recipes"));
  auto* intro = new QLabel(tr("Run these recipes side by side with the current settings. They share seed %1: "
                              "the same initial weights and the same batches, so the charts differ by "
                              "precision alone.")
                               .arg(seed),
                           this);
  intro->setWordWrap(true);
  m_list = new QListWidget(this);
  m_list->setObjectName(QStringLiteral("compareRecipeList"));
  for (const QString& r : SetupPanel::recipes()) {
    if (r == QLatin1String("custom")) continue;  // a comparison of presets
    auto* item = new QListWidgetItem(QStringLiteral("%1 — %2").arg(r, describeRecipe(r)), m_list);
    item->setToolTip(describeRecipe(r));
    item->setData(Qt::UserRole, r);
    item->setFlags(Qt::ItemIsEnabled | Qt::ItemIsUserCheckable | Qt::ItemIsSelectable);
    item->setCheckState(checked.contains(r) ? Qt::Checked : Qt::Unchecked);
  }
  m_list->setMinimumWidth(m_list->sizeHintForColumn(0) + 40);
  // As tall as its rows: the presets are few.
  m_list->setFixedHeight(m_list->sizeHintForRow(0) * m_list->count() + 2 * m_list->frameWidth() + 6);
  m_note = new QLabel(this);
  m_note->setForegroundRole(QPalette::PlaceholderText);
  m_buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
  m_buttons->button(QDialogButtonBox::Ok)->setText(tr("Start comparison"));
  connect(m_buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(m_buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  connect(m_list, &QListWidget::itemChanged, this, &CompareDialog::updateOk);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(intro);
  layout->addWidget(m_list);
  layout->addWidget(m_note);
  layout->addWidget(m_buttons);
  updateOk();
}

QStringList CompareDialog::recipes() const {
  QStringList out;
  for (int i = 0; i < m_list->count(); ++i)
    if (m_list->item(i)->checkState() == Qt::Checked) out << m_list->item(i)->data(Qt::UserRole).toString();
  return out;
}

void CompareDialog::setRecipes(const QStringList& recipes) {
  for (int i = 0; i < m_list->count(); ++i)
    m_list->item(i)->setCheckState(recipes.contains(m_list->item(i)->data(Qt::UserRole).toString()) ? Qt::Checked
                                                                                                   : Qt::Unchecked);
}

void CompareDialog::updateOk() {
  const int n = static_cast<int>(recipes().size());
  m_buttons->button(QDialogButtonBox::Ok)->setEnabled(n >= 1);
  m_note->setText(n == 0 ? tr("Tick at least one recipe.")
                         : n == 1 ? tr("1 run.") : tr("%1 runs, stepped round-robin in one trainer.").arg(n));
}
