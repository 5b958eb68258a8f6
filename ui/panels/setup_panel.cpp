// SetupPanel: the experiment's settings form; defaults follow the engine's
// (GradScaler's loss-scaling defaults, the recipes' scaling modes).
#include "panels/setup_panel.h"

#include "data/dataset.h"

#include <QComboBox>
#include <QDir>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QGroupBox>
#include <QFileInfo>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QThread>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <exception>
#include <functional>
#include <limits>

#include "amp/recipe.h"
#include "backend/cuda_module.h"
#include "backend/registry.h"
#include "charts/chart_style.h"
#include "data/text.h"
#include "panels/gpt_fields.h"
#include "panels/size_fields.h"
#include "panels/layer_rows.h"
#include "train/model_defaults.h"

namespace {

constexpr int kFolderItem = 3;    // "folder…" in the dataset combo
constexpr int kDefaultEpochs = 5;  // the length a run starts with
constexpr int kGptSteps = 300;     // a gpt's, in steps (SetupPanel::onModelChanged)
constexpr int kTextFileItem = 5;  // "text file…"

QComboBox* makeCombo(const QString& objectName, const QStringList& items, QWidget* parent) {
  auto* combo = new QComboBox(parent);
  combo->setObjectName(objectName);
  combo->addItems(items);
  return combo;
}

QGroupBox* makeGroup(const QString& title, QFormLayout*& form, QWidget* parent) {
  auto* box = new QGroupBox(title, parent);
  form = new QFormLayout(box);
  form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  form->setLabelAlignment(Qt::AlignLeft | Qt::AlignVCenter);
  return box;
}

// The loss scaling a recipe uses by default comes from the engine's
// recipe table (none for fp32/fp16/mixed-bf16, dynamic for mixed-fp16/fp8).
QString defaultScaling(const QString& recipe, const QString& current) {
  try {
    return QString::fromLatin1(engine::scaling_mode_key(engine::make_recipe(recipe.toStdString()).scaling.mode));
  } catch (const std::exception&) {
    return current;  // not a preset: keep what the user chose
  }
}

// One label column width for all groups, so the fields line up down the
// whole panel instead of group by group.
void alignFormLabels(const QList<QFormLayout*>& forms) {
  QList<QWidget*> labels;
  int width = 0;
  for (QFormLayout* form : forms)
    for (int row = 0; row < form->rowCount(); ++row)
      if (QLayoutItem* item = form->itemAt(row, QFormLayout::LabelRole); item && item->widget()) {
        labels << item->widget();
        width = qMax(width, item->widget()->sizeHint().width());
      }
  for (QWidget* label : labels) label->setMinimumWidth(width);
}

// A spin box that says when a typed number is out of its range, where a
// plain QDoubleSpinBox silently refuses the keystroke (typing 1000 into a
// field whose top is 10 left "10" on screen without a word).
class RangeSpin : public QDoubleSpinBox {
 public:
  using QDoubleSpinBox::QDoubleSpinBox;
  std::function<void(const QString&)> outOfRange;

  QValidator::State validate(QString& input, int& pos) const override {
    const QValidator::State state = QDoubleSpinBox::validate(input, pos);
    if (state != QValidator::Invalid || !outOfRange) return state;
    bool ok = false;
    const double v = locale().toDouble(input.trimmed(), &ok);
    if (!ok || v <= maximum()) return state;
    // Kept on screen so the message can name it; fixup() puts the last
    // good value back when editing ends.
    outOfRange(input.trimmed());
    return QValidator::Intermediate;
  }
};

}  // namespace

QStringList SetupPanel::recipes() {
  QStringList names;
  for (const std::string& name : engine::recipe_names()) names << QString::fromStdString(name);
  return names;
}

SetupPanel::SetupPanel(QWidget* parent) : QWidget(parent) {
  setObjectName(QStringLiteral("setupPanel"));
  auto* layout = new QVBoxLayout(this);

  // --- data and model ---
  QFormLayout* form = nullptr;
  QGroupBox* data = makeGroup(tr("Data and model"), form, this);
  m_dataset = makeCombo(QStringLiteral("datasetCombo"),
                        {QStringLiteral("fashion-mnist"), QStringLiteral("spirals"),
                         QStringLiteral("tiny-gradients"), tr("folder…"), QStringLiteral("jargon"),
                         tr("text file…")},
                        data);
  m_dataset->setItemData(4, QStringLiteral("jargon"));
  m_dataset->setItemData(4, tr("The Jargon File (Debian's jargon-text), a character per token, for the gpt"),
                         Qt::ToolTipRole);
  m_dataset->setItemData(kTextFileItem, tr("Any UTF-8 text file, a character per token, for the gpt"),
                         Qt::ToolTipRole);
  if (!QFileInfo::exists(QString::fromUtf8(engine::kJargonPath)))
    m_dataset->setItemData(4, tr("Not installed: apt-get install jargon-text"), Qt::ToolTipRole);
  m_dataset->setItemData(0, QStringLiteral("fashion-mnist"));
  m_dataset->setItemData(1, QStringLiteral("spirals"));
  m_dataset->setItemData(2, QStringLiteral("tiny-gradients"));
  m_dataset->setItemData(0, tr("Fashion-MNIST from /usr/share/datasets/fashion-mnist"), Qt::ToolTipRole);
  m_dataset->setItemData(1, tr("Two interleaved spirals, 2-D, two classes"), Qt::ToolTipRole);
  m_dataset->setItemData(2, tr("A regression whose gradients underflow FP16 unless the loss is scaled"),
                         Qt::ToolTipRole);
  m_dataset->setItemData(kFolderItem, tr("Any folder of MNIST-format IDX files"), Qt::ToolTipRole);
  connect(m_dataset, &QComboBox::activated, this, &SetupPanel::onDatasetActivated);
  // Whatever changes the dataset (a click, a config), the models follow.
  connect(m_dataset, &QComboBox::currentIndexChanged, this, [this] {
    if (m_model) updateModelChoices();
  });
  if (!QDir(QString::fromUtf8(engine::kFashionMnistDir)).exists()) {
    // The default experiment falls back to the built-in synthetic set.
    m_dataset->setItemData(0, tr("Not installed: apt-get install dataset-fashion-mnist"), Qt::ToolTipRole);
    m_dataset->setCurrentIndex(m_dataset->findData(QStringLiteral("spirals")));
  }
  form->addRow(tr("Dataset"), m_dataset);
  m_model = makeCombo(QStringLiteral("modelCombo"),
                      {QStringLiteral("mlp"), QStringLiteral("cnn"), QStringLiteral("transformer"),
                       QStringLiteral("gpt")},
                      data);
  form->addRow(tr("Model"), m_model);
  layout->addWidget(data);
  m_gpt = new GptFields(this);
  layout->addWidget(m_gpt);
  connect(m_gpt, &GptFields::changed, this, &SetupPanel::settingsChanged);
  m_gpt->setVisible(false);
  m_sizeFields = new SizeFields(this);
  layout->addWidget(m_sizeFields);
  connect(m_sizeFields, &SizeFields::changed, this, &SetupPanel::settingsChanged);
  connect(m_sizeFields, &SizeFields::sizeChosen, this, &SetupPanel::onSizeChosen);

  // --- optimisation and schedule ---
  QGroupBox* training = makeGroup(tr("Training"), form, this);
  m_optimizer = makeCombo(QStringLiteral("optimizerCombo"),
                          {QStringLiteral("sgd"), QStringLiteral("adam"), QStringLiteral("adamw")},
                          training);
  form->addRow(tr("Optimizer"), m_optimizer);
  auto* learningRate = new RangeSpin(training);
  m_learningRate = learningRate;
  m_learningRate->setObjectName(QStringLiteral("learningRateSpin"));
  m_learningRate->setDecimals(5);
  m_learningRate->setRange(0.00001, 10.0);  // the engine's limit: (0, 10]
  m_learningRate->setSingleStep(0.001);
  m_learningRate->setValue(0.05);
  m_learningRate->setCorrectionMode(QAbstractSpinBox::CorrectToPreviousValue);
  form->addRow(tr("Learning rate"), m_learningRate);
  m_learningRateNote = new QLabel(training);
  m_learningRateNote->setObjectName(QStringLiteral("learningRateNote"));
  m_learningRateNote->setWordWrap(true);
  m_learningRateNote->setStyleSheet(QStringLiteral("color:%1").arg(chart_style::kAlarmLine.name()));
  m_learningRateNote->hide();
  form->addRow(m_learningRateNote);
  // The value changes when the edit ends (Return, Tab), not per keystroke:
  // "1000" typed is never 1, 10, then a clamped 10.
  m_learningRate->setKeyboardTracking(false);
  learningRate->outOfRange = [this](const QString& text) {
    if (m_learningRateNote->isHidden()) m_learningRateKept = m_learningRate->value();
    m_learningRateNote->setText(tr("%1 is above the largest learning rate, %2: not taken")
                                    .arg(text, m_learningRate->textFromValue(m_learningRate->maximum())));
    m_learningRateNote->show();
  };
  connect(m_learningRate, &QDoubleSpinBox::editingFinished, this, [this] {
    if (m_learningRateNote->isHidden() || m_learningRateNote->text().endsWith(QLatin1Char(')'))) return;
    // The spin box clamped the refused text to its top: the value before
    // the edit stays.
    m_learningRate->setValue(m_learningRateKept);
    m_learningRateNote->setText(m_learningRateNote->text() + tr(" (still %1)").arg(m_learningRate->cleanText()));
  });
  connect(m_learningRate->findChild<QLineEdit*>(), &QLineEdit::textEdited, this, [this](const QString& text) {
    bool ok = false;
    const double v = m_learningRate->locale().toDouble(text.trimmed(), &ok);
    if (!ok || v <= m_learningRate->maximum()) m_learningRateNote->hide();
  });
  m_batch = new QSpinBox(training);
  m_batch->setObjectName(QStringLiteral("batchSpin"));
  m_batch->setRange(1, 65536);
  m_batch->setValue(64);
  form->addRow(tr("Batch"), m_batch);
  m_durationUnit = makeCombo(QStringLiteral("durationUnitCombo"), {tr("epochs"), tr("steps")}, training);
  m_duration = new QSpinBox(training);
  m_duration->setObjectName(QStringLiteral("durationSpin"));
  m_duration->setRange(1, 10'000'000);
  m_duration->setValue(m_epochs);
  auto* durationRow = new QWidget(training);
  auto* durationLayout = new QHBoxLayout(durationRow);
  durationLayout->setContentsMargins(0, 0, 0, 0);
  durationLayout->addWidget(m_duration, 1);
  durationLayout->addWidget(m_durationUnit);
  connect(m_durationUnit, &QComboBox::currentIndexChanged, this, &SetupPanel::onDurationUnitChanged);
  form->addRow(tr("Length"), durationRow);
  m_seed = new QSpinBox(training);
  m_seed->setObjectName(QStringLiteral("seedSpin"));
  m_seed->setRange(0, std::numeric_limits<int>::max());
  m_seed->setValue(42);
  m_seed->setToolTip(tr("Runs with the same seed share initial weights and batch order"));
  form->addRow(tr("Seed"), m_seed);
  layout->addWidget(training);
  m_shownModel = m_model->currentText();
  connect(m_model, &QComboBox::currentTextChanged, this, &SetupPanel::onModelChanged);

  // --- precision ---
  QGroupBox* precision = makeGroup(tr("Precision"), form, this);
  m_recipe = makeCombo(QStringLiteral("recipeCombo"), recipes(), precision);
  m_recipe->setCurrentText(QStringLiteral("mixed-fp16"));
  m_recipe->setToolTip(tr("A preset of every layer's compute, storage and accumulation formats"));
  form->addRow(tr("Recipe"), m_recipe);
  layout->addWidget(precision);

  // --- loss scaling: PyTorch GradScaler's defaults, from the engine ---
  const engine::LossScalerConfig scalerDefaults;
  QGroupBox* scaler = makeGroup(tr("Loss scaling"), form, this);
  m_scalerMode = makeCombo(QStringLiteral("lossScaleModeCombo"),
                           {QStringLiteral("none"), QStringLiteral("static"), QStringLiteral("dynamic")}, scaler);
  form->addRow(tr("Mode"), m_scalerMode);
  m_initialScale = new QDoubleSpinBox(scaler);
  m_initialScale->setObjectName(QStringLiteral("initialScaleSpin"));
  m_initialScale->setDecimals(0);
  m_initialScale->setRange(1.0, 16777216.0);  // 2^0 .. 2^24
  m_initialScale->setValue(scalerDefaults.init_scale);  // 2^16
  form->addRow(tr("Initial scale"), m_initialScale);
  m_growthFactor = new QDoubleSpinBox(scaler);
  m_growthFactor->setObjectName(QStringLiteral("growthFactorSpin"));
  m_growthFactor->setRange(1.0, 16.0);
  m_growthFactor->setSingleStep(0.5);
  m_growthFactor->setValue(scalerDefaults.growth_factor);
  form->addRow(tr("Growth factor"), m_growthFactor);
  m_backoff = new QDoubleSpinBox(scaler);
  m_backoff->setObjectName(QStringLiteral("backoffSpin"));
  m_backoff->setRange(0.01, 0.99);
  m_backoff->setSingleStep(0.05);
  m_backoff->setValue(scalerDefaults.backoff_factor);
  form->addRow(tr("Backoff factor"), m_backoff);
  m_growthInterval = new QSpinBox(scaler);
  m_growthInterval->setObjectName(QStringLiteral("growthIntervalSpin"));
  m_growthInterval->setRange(1, 1'000'000);
  m_growthInterval->setValue(static_cast<int>(scalerDefaults.growth_interval));
  m_growthInterval->setSuffix(tr(" steps"));
  form->addRow(tr("Growth interval"), m_growthInterval);
  connect(m_scalerMode, &QComboBox::currentIndexChanged, this, &SetupPanel::updateScalerControls);
  auto edited = [this] {
    if (m_filling == 0) emit lossScalerEdited();
  };
  connect(m_scalerMode, &QComboBox::currentIndexChanged, this, edited);
  for (QDoubleSpinBox* spin : {m_initialScale, m_growthFactor, m_backoff})
    connect(spin, &QDoubleSpinBox::valueChanged, this, edited);
  connect(m_growthInterval, &QSpinBox::valueChanged, this, edited);
  layout->addWidget(scaler);

  // --- backend ---
  QGroupBox* backend = makeGroup(tr("Backend"), form, this);
  m_backend = makeCombo(QStringLiteral("backendCombo"),
                        {QStringLiteral("auto"), QStringLiteral("cpu"), QStringLiteral("cuda")}, backend);
  form->addRow(tr("Device"), m_backend);
  m_backendNote = new QLabel(backend);
  m_backendNote->setObjectName(QStringLiteral("backendNote"));
  m_backendNote->setWordWrap(true);
  m_backendNote->setForegroundRole(QPalette::PlaceholderText);
  form->addRow(m_backendNote);
  m_threads = new QSpinBox(backend);
  m_threads->setObjectName(QStringLiteral("threadsSpin"));
  m_threads->setRange(0, std::max(1, QThread::idealThreadCount()));
  m_threads->setSpecialValueText(tr("all cores"));
  m_threads->setValue(defaultThreads());
  m_threads->setToolTip(tr("Engine CPU threads. With several runs each run steps on a core of its own; "
                           "the engine runs below the window's priority, so drawing never waits for it."));
  form->addRow(tr("CPU threads"), m_threads);
  layout->addWidget(backend);
  setUpBackendChoice();

  layout->addStretch(1);
  alignFormLabels(findChildren<QFormLayout*>());

  connect(m_recipe, &QComboBox::currentTextChanged, this, &SetupPanel::onRecipeChanged);
  onRecipeChanged(m_recipe->currentText());
  updateModelChoices();

  // One signal for any edit, so callers need not know the controls.
  for (QComboBox* c : findChildren<QComboBox*>())
    connect(c, &QComboBox::currentIndexChanged, this, &SetupPanel::settingsChanged);
  // (The gpt's and the size's fields say so through their changed().)
  for (QSpinBox* s : findChildren<QSpinBox*>())
    if (!m_gpt->isAncestorOf(s) && !m_sizeFields->isAncestorOf(s))
      connect(s, &QSpinBox::valueChanged, this, &SetupPanel::settingsChanged);
  for (QDoubleSpinBox* s : findChildren<QDoubleSpinBox*>())
    if (!m_gpt->isAncestorOf(s)) connect(s, &QDoubleSpinBox::valueChanged, this, &SetupPanel::settingsChanged);
  // Whatever changes, the Size choice says which size the shape is.
  connect(this, &SetupPanel::settingsChanged, this, &SetupPanel::updateSizeChoice);
  updateSizeChoice();
}

SetupSettings SetupPanel::settings() const {
  SetupSettings s;
  s.dataset = m_dataset->currentData().toString();
  s.model = m_model->currentText();
  s.optimizer = m_optimizer->currentText();
  s.learningRate = m_learningRate->value();
  s.batch = m_batch->value();
  s.useSteps = m_durationUnit->currentIndex() == 1;
  s.epochs = s.useSteps ? m_epochs : m_duration->value();
  s.steps = s.useSteps ? m_duration->value() : m_steps;
  s.seed = m_seed->value();
  s.recipe = m_recipe->currentText();
  s.lossScaling = m_scalerMode->currentText();
  s.initialScale = m_initialScale->value();
  s.growthFactor = m_growthFactor->value();
  s.backoffFactor = m_backoff->value();
  s.growthInterval = m_growthInterval->value();
  s.backend = m_backend->currentText();
  s.threads = m_threads->value();
  return s;
}

// All cores: a comparison steps its runs side by side, one core each, and
// the engine runs below the UI's priority (TrainingController), so the
// window stays responsive while every core trains.
int SetupPanel::defaultThreads() { return 0; }

engine::RunConfig SetupPanel::toConfig(const engine::RunConfig& base) const {
  const SetupSettings s = settings();
  engine::RunConfig c = base;
  c.dataset = s.dataset.toStdString();
  c.model = s.model.toStdString();
  c.optimizer = s.optimizer.toStdString();
  c.lr = s.learningRate;
  c.batch = s.batch;
  if (s.useSteps) {
    c.steps = s.steps;
  } else {
    c.steps = 0;
    c.epochs = s.epochs;
  }
  c.seed = static_cast<std::uint64_t>(s.seed);
  c.recipe = s.recipe.toStdString();
  c.backend = s.backend.toStdString();
  c.threads = s.threads;
  m_sizeFields->apply(c);
  if (c.model == "gpt") m_gpt->apply(c);
  const engine::LossScalerConfig scaler = lossScaler();
  engine::LossScalerConfig recipeDefault;
  try {
    recipeDefault = engine::make_recipe(c.recipe).scaling;
  } catch (const std::exception&) {
  }
  const bool differs = scaler.mode != recipeDefault.mode ||
                       (scaler.mode != engine::ScalingMode::None &&
                        (scaler.init_scale != recipeDefault.init_scale ||
                         scaler.growth_factor != recipeDefault.growth_factor ||
                         scaler.backoff_factor != recipeDefault.backoff_factor ||
                         scaler.growth_interval != recipeDefault.growth_interval));
  if (differs || base.loss_scale_set) {
    c.loss_scale = scaler;
    c.loss_scale_set = true;
  }
  return c;
}

engine::LossScalerConfig SetupPanel::lossScaler() const {
  engine::LossScalerConfig scaler;
  const QString mode = m_scalerMode->currentText();
  scaler.mode = mode == QLatin1String("static")    ? engine::ScalingMode::Static
                : mode == QLatin1String("dynamic") ? engine::ScalingMode::Dynamic
                                                   : engine::ScalingMode::None;
  scaler.init_scale = m_initialScale->value();
  scaler.growth_factor = m_growthFactor->value();
  scaler.backoff_factor = m_backoff->value();
  scaler.growth_interval = m_growthInterval->value();
  return scaler;
}

void SetupPanel::setRecipe(const QString& recipe) { m_recipe->setCurrentText(recipe); }

void SetupPanel::applyConfig(const engine::RunConfig& c) {
  ++m_filling;
  const QString dataset = QString::fromStdString(c.dataset);
  const int builtin = m_dataset->findData(dataset);
  if (builtin >= 0 && builtin != kFolderItem && builtin != kTextFileItem) {
    m_dataset->setCurrentIndex(builtin);
    m_lastDatasetIndex = builtin;
  } else if (dataset.startsWith(QLatin1String("text:"))) {
    const QString path = dataset.mid(5);
    m_dataset->setItemData(kTextFileItem, dataset);
    m_dataset->setItemText(kTextFileItem, QFileInfo(path).fileName());
    m_dataset->setItemData(kTextFileItem, QDir::toNativeSeparators(path), Qt::ToolTipRole);
    m_dataset->setCurrentIndex(kTextFileItem);
    m_lastDatasetIndex = kTextFileItem;
  } else {
    m_dataset->setItemData(kFolderItem, dataset);
    m_dataset->setItemText(kFolderItem, QDir(dataset).dirName() + QStringLiteral("/"));
    m_dataset->setItemData(kFolderItem, QDir::toNativeSeparators(dataset), Qt::ToolTipRole);
    m_dataset->setCurrentIndex(kFolderItem);
    m_lastDatasetIndex = kFolderItem;
  }
  m_model->setCurrentText(QString::fromStdString(c.model));
  m_gpt->show(c);
  m_sizeFields->show(c);
  m_optimizer->setCurrentText(QString::fromStdString(c.optimizer));
  m_learningRate->setValue(c.lr);
  m_batch->setValue(static_cast<int>(std::min<std::int64_t>(c.batch, m_batch->maximum())));
  if (c.steps > 0) {
    m_epochs = static_cast<int>(std::min<std::int64_t>(c.epochs, m_duration->maximum()));
    m_durationUnit->setCurrentIndex(1);
    m_duration->setValue(static_cast<int>(std::min<std::int64_t>(c.steps, m_duration->maximum())));
  } else {
    m_durationUnit->setCurrentIndex(0);
    m_duration->setValue(static_cast<int>(std::min<std::int64_t>(c.epochs, m_duration->maximum())));
  }
  m_seed->setValue(static_cast<int>(std::min<std::uint64_t>(c.seed, static_cast<std::uint64_t>(m_seed->maximum()))));
  m_recipe->setCurrentText(QString::fromStdString(c.recipe));  // sets the recipe's scaling first
  if (c.loss_scale_set) {
    m_scalerMode->setCurrentText(QString::fromLatin1(engine::scaling_mode_key(c.loss_scale.mode)));
    m_initialScale->setValue(c.loss_scale.init_scale);
    m_growthFactor->setValue(c.loss_scale.growth_factor);
    m_backoff->setValue(c.loss_scale.backoff_factor);
    m_growthInterval->setValue(static_cast<int>(c.loss_scale.growth_interval));
  }
  m_backend->setCurrentText(QString::fromStdString(c.backend));
  if (c.threads > 0) m_threads->setValue(static_cast<int>(c.threads));
  updateScalerControls();
  // The model the config names stays selected even where the data cannot
  // feed it: Start then says why (an explicit --model is the user's).
  auto* items = qobject_cast<QStandardItemModel*>(m_model->model());
  const QString model = m_model->currentText();
  updateModelChoices();
  if (items && m_model->currentText() != model) m_model->setCurrentText(model);
  --m_filling;
  updateSizeChoice();
}

// A size chosen: the engine sizes the model the panel shows (its shape and
// batch, train/model_defaults.h apply_size), and the fields show it.
void SetupPanel::onSizeChosen(const QString& size) {
  engine::RunConfig c = toConfig(engine::RunConfig{});
  engine::apply_size(c, size.toStdString());
  m_sizeFields->show(c);
  if (c.model == "gpt") m_gpt->show(c);
  m_batch->setValue(static_cast<int>(std::min<std::int64_t>(c.batch, m_batch->maximum())));
  updateSizeChoice();
  emit settingsChanged();
}

void SetupPanel::updateSizeChoice() { m_sizeFields->showSize(engine::size_of(toConfig(engine::RunConfig{}))); }

// "folder…" asks for a directory of IDX files; the chosen path becomes
// the item's data (and its text, elided), cancelling restores the previous
// choice.
void SetupPanel::onDatasetActivated(int index) {
  if (index == kTextFileItem) {
    const QString start = m_dataset->itemData(kTextFileItem).toString().mid(5);
    const QString file = QFileDialog::getOpenFileName(this, tr("A UTF-8 text file"),
                                                      start.isEmpty() ? QDir::homePath() : start);
    if (file.isEmpty()) {
      m_dataset->setCurrentIndex(m_lastDatasetIndex);
      return;
    }
    QString error;
    if (!setDatasetTextFile(file, &error)) QMessageBox::warning(this, tr("Not a text the gpt can read"), error);
    return;
  }
  if (index != kFolderItem) {
    m_lastDatasetIndex = index;
    updateModelChoices();
    return;
  }
  const QString start = m_dataset->itemData(kFolderItem).toString();
  const QString dir = QFileDialog::getExistingDirectory(this, tr("Folder of MNIST-format IDX files"),
                                                        start.isEmpty() ? QDir::homePath() : start);
  if (dir.isEmpty()) {
    m_dataset->setCurrentIndex(m_lastDatasetIndex);
    return;
  }
  QString error;
  if (!setDatasetFolder(dir, &error)) QMessageBox::warning(this, tr("Not a dataset folder"), error);
}

QString SetupPanel::datasetFolderProblem(const QString& dir) {
  const QDir d(dir);
  if (!d.exists()) return tr("%1: no such folder").arg(QDir::toNativeSeparators(dir));
  QStringList missing;
  for (const char* name : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                           "t10k-labels-idx1-ubyte"}) {
    const QString plain = QString::fromLatin1(name);
    const QFileInfo a(d.filePath(plain)), b(d.filePath(plain + QStringLiteral(".gz")));
    if (!(a.isFile() && a.size() > 0) && !(b.isFile() && b.size() > 0)) missing << plain;
  }
  if (missing.isEmpty()) return {};
  return tr("%1: not a dataset folder: missing %2 (MNIST-format IDX files, optionally .gz)")
      .arg(QDir::toNativeSeparators(dir), missing.join(QStringLiteral(", ")));
}

bool SetupPanel::setDatasetFolder(const QString& dir, QString* error) {
  const QString problem = datasetFolderProblem(dir);
  if (!problem.isEmpty()) {
    if (error) *error = problem;
    m_dataset->setCurrentIndex(m_lastDatasetIndex);  // the previous choice stays
    return false;
  }
  m_dataset->setItemData(kFolderItem, dir);
  m_dataset->setItemText(kFolderItem, QDir(dir).dirName() + QStringLiteral("/"));
  m_dataset->setItemData(kFolderItem, QDir::toNativeSeparators(dir), Qt::ToolTipRole);
  m_lastDatasetIndex = kFolderItem;
  if (m_dataset->currentIndex() != kFolderItem) m_dataset->setCurrentIndex(kFolderItem);
  updateModelChoices();
  emit settingsChanged();
  return true;
}

bool SetupPanel::setDatasetTextFile(const QString& path, QString* error) {
  const std::string spec = "text:" + path.toStdString();
  try {
    (void)engine::plan_text_dataset(spec);
  } catch (const std::exception& e) {
    if (error) *error = QString::fromStdString(e.what());
    m_dataset->setCurrentIndex(m_lastDatasetIndex);  // the previous choice stays
    return false;
  }
  m_dataset->setItemData(kTextFileItem, QString::fromStdString(spec));
  m_dataset->setItemText(kTextFileItem, QFileInfo(path).fileName());
  m_dataset->setItemData(kTextFileItem, QDir::toNativeSeparators(path), Qt::ToolTipRole);
  m_lastDatasetIndex = kTextFileItem;
  if (m_dataset->currentIndex() != kTextFileItem) m_dataset->setCurrentIndex(kTextFileItem);
  updateModelChoices();
  emit settingsChanged();
  return true;
}

bool SetupPanel::modelEnabled(const QString& model) const {
  auto* items = qobject_cast<QStandardItemModel*>(m_model->model());
  const int row = m_model->findText(model);
  return items && row >= 0 && items->item(row)->isEnabled();
}

// A model the data set cannot feed is not offered: the engine's builder
// says so (the same words Start would show).
void SetupPanel::updateModelChoices() {
  auto* items = qobject_cast<QStandardItemModel*>(m_model->model());
  if (!items) return;
  engine::RunConfig c = toConfig();
  const bool text = engine::is_text_spec(c.dataset);
  for (int row = 0; row < m_model->count(); ++row) {
    c.model = m_model->itemText(row).toStdString();
    QString why;
    // A gpt reads characters, the other models images or vectors.
    if (text != (c.model == "gpt"))
      why = text ? tr("%1 reads images or vectors; a text set is for the gpt").arg(m_model->itemText(row))
                 : tr("the gpt reads text: choose jargon or a text file");
    else
      try {
        (void)layerRowsFor(c);
      } catch (const std::exception& e) {
        why = QString::fromStdString(e.what());
      }
    items->item(row)->setEnabled(why.isEmpty());
    items->item(row)->setToolTip(why.isEmpty() ? QString() : tr("Not for this dataset: %1").arg(why));
  }
  if (!modelEnabled(m_model->currentText())) {
    for (int row = 0; row < m_model->count(); ++row)
      if (items->item(row)->isEnabled()) {
        m_model->setCurrentIndex(row);
        break;
      }
  }
}

// The optimizer and learning rate follow the model while they are still
// the previous model's defaults: nobody chose them, and a gpt trained with
// the image models' SGD at 0.05 learns next to nothing in a first run.
// Values the user set stay (train/model_defaults.h, as the CLI does).
void SetupPanel::onModelChanged(const QString& model) {
  const bool gpt = model == QLatin1String("gpt"), wasGpt = m_shownModel == QLatin1String("gpt");
  m_gpt->setVisible(gpt);
  m_sizeFields->setModel(model);
  // The length too, while it is the panel's own default: an epoch of a text
  // is every window of it (jargon: 20,000 steps of 64, and one evaluation,
  // hence one sample, at its end), so a gpt starts at kGptSteps steps, the
  // length its learning rate was chosen for.
  const bool steps = m_durationUnit->currentIndex() == 1;
  if (gpt && !wasGpt && !steps && m_duration->value() == kDefaultEpochs) {
    m_durationUnit->setCurrentIndex(1);
    m_duration->setValue(kGptSteps);
  } else if (!gpt && wasGpt && steps && m_duration->value() == kGptSteps) {
    m_durationUnit->setCurrentIndex(0);
    m_duration->setValue(kDefaultEpochs);
  }
  const engine::OptimizerDefaults was = engine::optimizer_defaults(m_shownModel.toStdString());
  m_shownModel = model;
  if (m_optimizer->currentText().toStdString() != was.optimizer ||
      std::fabs(m_learningRate->value() - was.lr) > 1e-12)
    return;
  const engine::OptimizerDefaults now = engine::optimizer_defaults(model.toStdString());
  m_optimizer->setCurrentText(QString::fromStdString(now.optimizer));
  m_learningRate->setValue(now.lr);
}

void SetupPanel::onRecipeChanged(const QString& recipe) {
  // "custom" comes from editing the precision table: the loss scaling the
  // user had stays (the engine's custom preset alone would turn it off).
  ++m_filling;
  if (recipe != QLatin1String("custom"))
    m_scalerMode->setCurrentText(defaultScaling(recipe, m_scalerMode->currentText()));
  --m_filling;
  updateScalerControls();
}

// The spin box keeps one value per unit, so switching back and forth does
// not lose what the user typed.
void SetupPanel::onDurationUnitChanged(int index) {
  const bool steps = index == 1;
  if (steps) {
    m_epochs = m_duration->value();
    m_duration->setValue(m_steps);
  } else {
    m_steps = m_duration->value();
    m_duration->setValue(m_epochs);
  }
}

void SetupPanel::updateScalerControls() {
  const QString mode = m_scalerMode->currentText();
  const bool scaled = mode != QLatin1String("none");
  const bool dynamic = mode == QLatin1String("dynamic");
  m_initialScale->setEnabled(scaled);
  m_growthFactor->setEnabled(dynamic);
  m_backoff->setEnabled(dynamic);
  m_growthInterval->setEnabled(dynamic);
}

// "cuda" is selectable only when the registry says it can train here (the
// module loaded, a device, the backend built); the disabled item's tooltip
// (and the note under the combo) say why not.
void SetupPanel::setUpBackendChoice() {
  auto* model = qobject_cast<QStandardItemModel*>(m_backend->model());
  QStandardItem* cuda = model ? model->item(2) : nullptr;
  std::string why;
  for (const engine::BackendAvailability& b : engine::available_backends())
    if (b.name == "cuda") why = b.reason;
  if (why.empty()) {
    engine::CudaDeviceInfo info;
    QString note = tr("CUDA available");
    if (engine::cuda_device_info(0, info).ok())
      note = tr("CUDA: %1 (sm_%2%3, %4 GiB)")
                 .arg(QString::fromStdString(info.name))
                 .arg(info.compute_major)
                 .arg(info.compute_minor)
                 .arg(static_cast<double>(info.memory_total) / (1024.0 * 1024.0 * 1024.0), 0, 'f', 1);
    m_backendNote->setText(note);
    if (cuda) cuda->setToolTip(note);
    return;
  }
  const QString reason = QString::fromStdString(why);
  if (cuda) {
    cuda->setEnabled(false);
    cuda->setToolTip(tr("CUDA unavailable: %1").arg(reason));
  }
  m_backend->setItemData(0, tr("CPU (CUDA unavailable: %1)").arg(reason), Qt::ToolTipRole);
  // The note keeps the gist ("no CUDA device", "libpl_cuda.so not found");
  // the whole reason is in the tooltip.
  const QString gist = reason.section(QLatin1Char(':'), 0, 0).section(QStringLiteral(" ("), 0, 0);
  m_backendNote->setText(tr("CUDA unavailable: %1").arg(gist));
  m_backendNote->setToolTip(reason);
}
