// FaultDialog: a form (run, target, layer, value) over the store's live runs.
#include "inspect/fault_dialog.h"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QRadioButton>
#include <QVBoxLayout>

#include <exception>

#include "panels/layer_rows.h"
#include "session/run_store.h"

FaultDialog::FaultDialog(const RunStore& store, const QVector<int>& runs, QWidget* parent)
    : QDialog(parent), m_store(store) {
  setObjectName(QStringLiteral("faultDialog"));
  setWindowTitle(tr("Inject NaN"));
  m_run = new QComboBox;
  m_run->setObjectName(QStringLiteral("faultRun"));
  for (int id : runs)
    m_run->addItem(QStringLiteral("%1 (%2)").arg(store.run(id).name, store.run(id).recipe), id);
  m_target = new QComboBox;
  m_target->setObjectName(QStringLiteral("faultTarget"));
  m_target->addItem(tr("weights"), static_cast<int>(engine::FaultTarget::Weights));
  m_target->addItem(tr("activations (the layer's output)"), static_cast<int>(engine::FaultTarget::Activations));
  m_target->addItem(tr("gradients (the layer's weight gradient)"), static_cast<int>(engine::FaultTarget::Gradients));
  m_target->addItem(tr("loss"), static_cast<int>(engine::FaultTarget::Loss));
  m_target->setCurrentIndex(2);  // the loss-scaling story: a gradient overflows
  m_layer = new QComboBox;
  m_layer->setObjectName(QStringLiteral("faultLayer"));
  m_nan = new QRadioButton(tr("NaN"));
  m_inf = new QRadioButton(tr("+inf"));
  m_nan->setChecked(true);
  auto* value = new QHBoxLayout;
  value->addWidget(m_nan);
  value->addWidget(m_inf);
  value->addStretch(1);

  auto* form = new QFormLayout;
  form->addRow(tr("Run:"), m_run);
  form->addRow(tr("Into:"), m_target);
  form->addRow(tr("Layer:"), m_layer);
  form->addRow(tr("Value:"), value);
  auto* note = new QLabel(tr("At the run's next step. Mixed precision with loss scaling skips the step and halves "
                             "the scale; a run without it applies the non-finite update and diverges."));
  note->setWordWrap(true);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
  buttons->button(QDialogButtonBox::Ok)->setText(tr("Inject"));
  buttons->button(QDialogButtonBox::Ok)->setEnabled(!runs.isEmpty());
  connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(form);
  layout->addWidget(note);
  layout->addWidget(buttons);

  connect(m_run, &QComboBox::currentIndexChanged, this, &FaultDialog::fillLayers);
  connect(m_target, &QComboBox::currentIndexChanged, this, &FaultDialog::fillLayers);
  fillLayers();
}

// The layers of the chosen run's model; weights and gradients only where
// the layer has weights; none for the loss.
void FaultDialog::fillLayers() {
  const QString before = m_layer->currentText();
  m_layer->clear();
  const engine::FaultTarget t = target();
  m_layer->setEnabled(t != engine::FaultTarget::Loss);
  const int id = runId();
  if (id < 0 || t == engine::FaultTarget::Loss) return;
  try {
    for (const PrecisionTableRow& row : layerRowsFor(m_store.run(id).config))
      if (t == engine::FaultTarget::Activations || row.parameters > 0) m_layer->addItem(row.layer);
  } catch (const std::exception&) {
    // The run was built from this config: it fits.
  }
  const int keep = m_layer->findText(before);
  if (keep >= 0) m_layer->setCurrentIndex(keep);
}

int FaultDialog::runId() const { return m_run->currentIndex() < 0 ? -1 : m_run->currentData().toInt(); }

engine::FaultTarget FaultDialog::target() const {
  return static_cast<engine::FaultTarget>(m_target->currentData().toInt());
}

std::string FaultDialog::layer() const {
  return target() == engine::FaultTarget::Loss ? std::string() : m_layer->currentText().toStdString();
}

bool FaultDialog::inf() const { return m_inf->isChecked(); }

void FaultDialog::setRun(int storeId) {
  const int i = m_run->findData(storeId);
  if (i >= 0) m_run->setCurrentIndex(i);
}

void FaultDialog::setTarget(engine::FaultTarget target) {
  const int i = m_target->findData(static_cast<int>(target));
  if (i >= 0) m_target->setCurrentIndex(i);
}

bool FaultDialog::setLayer(const QString& layer) {
  const int i = m_layer->findText(layer);
  if (i >= 0) m_layer->setCurrentIndex(i);
  return i >= 0;
}

void FaultDialog::setInf(bool inf) { (inf ? m_inf : m_nan)->setChecked(true); }
