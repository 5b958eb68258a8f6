// PrecisionTableController: fills the table from the engine's layer catalog
// (layer_rows) for the next run or a live one, and routes edits.
#include "panels/precision_table_controller.h"

#include <QGroupBox>
#include <QItemSelectionModel>

#include <exception>

#include "numeric/format.h"
#include "panels/layer_rows.h"
#include "panels/precision_table.h"
#include "panels/precision_table_model.h"
#include "panels/setup_panel.h"
#include "session/command_line.h"
#include "session/run_store.h"
#include "session/training_controller.h"
#include "session/user_messages.h"

PrecisionTableController::PrecisionTableController(SetupPanel* setup, PrecisionTable* table, QGroupBox* box,
                                                   RunStore* store, TrainingController* controller,
                                                   UserMessages* messages, std::function<int()> liveFocus,
                                                   QObject* parent)
    : QObject(parent),
      m_setup(setup),
      m_table(table),
      m_box(box),
      m_store(store),
      m_controller(controller),
      m_messages(messages),
      m_liveFocus(std::move(liveFocus)) {
  connect(m_table->precisionModel(), &PrecisionTableModel::precisionEdited, this,
          [this](int row, const engine::LayerPrecision&) { onEdited(row); });
  connect(m_table->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          [this](const QModelIndex& current) {
            if (!current.isValid()) return;
            const PrecisionTableRow& row = m_table->precisionModel()->rows()[current.row()];
            if (row.parameters > 0) emit layerSelected(row.layer);
          });
  // Setup -> the table (for the next run), unless it follows a live run.
  connect(m_setup, &SetupPanel::settingsChanged, this, [this] {
    if (!m_controller->active()) showNextRun();
  });
}

void PrecisionTableController::setBaseConfig(const engine::RunConfig& config) {
  m_baseConfig = config;
  m_setup->applyConfig(config);
  showNextRun();
}

bool PrecisionTableController::applyLaunchOptions(const LaunchOptions& options) {
  if (!options.configError.isEmpty()) {
    m_messages->error(tr("Cannot use the config file"), options.configError);
    // The run options still apply (on the panel's settings).
  }
  try {
    // The panel's settings with only what the options name changed (or
    // the config file's, when it loaded).
    setBaseConfig(applyLaunchSettings(m_setup->toConfig(m_baseConfig), options));
  } catch (const std::exception& e) {
    m_messages->error(tr("Bad command-line setting"), QString::fromStdString(e.what()));
    return false;
  }
  return options.configError.isEmpty();
}

engine::RunConfig PrecisionTableController::nextRunConfig() const {
  engine::RunConfig c = m_setup->toConfig(m_baseConfig);
  if (c.recipe == "custom") {
    // The table is the recipe: every layer's precision, edited or not.
    c.layers.clear();
    for (const PrecisionTableRow& row : m_table->precisionModel()->rows())
      c.layers[row.layer.toStdString()] = row.precision;
  }
  return c;
}

void PrecisionTableController::showNextRun() {
  if (m_rebuilding) return;
  m_rebuilding = true;
  m_shownRun = -1;
  engine::RunConfig c = m_setup->toConfig(m_baseConfig);
  if (c.recipe == "custom") {
    // Keep the table's precisions for the layers the new model still has.
    for (const PrecisionTableRow& row : m_table->precisionModel()->rows())
      c.layers[row.layer.toStdString()] = row.precision;
  }
  m_box->setTitle(tr("Per-layer precision of the next run: %1 (double-click a format to change it)")
                      .arg(QString::fromStdString(c.recipe)));
  try {
    m_table->precisionModel()->setRows(layerRowsFor(c));
    m_table->setToolTip(QString());
  } catch (const std::exception& e) {
    // A model that cannot take this data set (cnn on spirals): say so; the
    // Start button reports it again with the same words.
    m_table->precisionModel()->setRows({});
    m_table->setToolTip(QString::fromStdString(e.what()));
    m_messages->status(QString::fromStdString(e.what()), 8000);
  }
  m_rebuilding = false;
}

void PrecisionTableController::showRun(int storeId) {
  const RunData& run = m_store->run(storeId);
  m_shownRun = storeId;
  engine::RunConfig c = run.config;
  for (const engine::Event& e : run.events)
    if (e.kind == engine::EventKind::PrecisionChange) c.layers[e.layer] = e.precision;
  m_box->setTitle(tr("Per-layer precision of %1: %2, live (double-click a format to change it at the next step)")
                      .arg(run.name, QString::fromStdString(run.config.recipe)));
  try {
    m_table->precisionModel()->setRows(layerRowsFor(c));
  } catch (const std::exception&) {
    // The run was built from this config: it fits.
  }
}

void PrecisionTableController::onEdited(int row) {
  const PrecisionTableRow& r = m_table->precisionModel()->rows()[row];
  const QString formats = QStringLiteral("%1/%2/%3")
                              .arg(QString::fromLatin1(engine::format_name(r.precision.compute)),
                                   QString::fromLatin1(engine::format_name(r.precision.storage)),
                                   QString::fromLatin1(engine::format_name(r.precision.accumulate)));
  if (m_shownRun >= 0) {
    // The table shows a live run: the edit is that run's, from its next
    // step. The setup panel describes the next run, as a notebook's cell
    // does, and stays as it is (it used to turn 'custom' without a word).
    const QString name = m_store->run(m_shownRun).name;
    if (m_controller->setLayerPrecision(m_shownRun, r.layer.toStdString(), r.precision))
      m_messages->status(tr("%1: %2 → %3 from the next step (this run only; the next run keeps the setup's "
                            "recipe, %4)")
                             .arg(name, r.layer, formats, m_setup->settings().recipe),
                         8000);
    else
      m_messages->status(tr("%1 is no longer training: %2 not changed").arg(name, r.layer), 8000);
    return;
  }
  // Mid-run with the table on the next run (no live run selected): the
  // engine applies it to the focused live run at its next step boundary.
  const int live = m_liveFocus();
  if (live >= 0 && m_controller->setLayerPrecision(live, r.layer.toStdString(), r.precision))
    m_messages->status(tr("%1: %2 → %3 at the next step").arg(m_store->run(live).name, r.layer, formats), 6000);
  // The next run is 'custom': the table, as edited, is its recipe.
  if (m_setup->settings().recipe != QLatin1String("custom")) {
    m_rebuilding = true;  // the table already shows what custom will be
    m_setup->setRecipe(QStringLiteral("custom"));
    m_rebuilding = false;
  }
}
