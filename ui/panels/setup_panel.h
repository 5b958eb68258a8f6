// SetupPanel: the experiment's settings (data, model, optimizer, schedule,
// precision recipe, loss scaler, backend) in the left dock.
#pragma once

#include <QString>
#include <QWidget>

#include "train/run_config.h"

class GptFields;
class SizeFields;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QSpinBox;

// What the panel holds, by value (keys are the CLI/config spellings of
// README.md "Command line").
struct SetupSettings {
  QString dataset;        // "fashion-mnist", "spirals", "tiny-gradients", "jargon", "text:PATH", or a folder path
  QString model;          // "mlp", "cnn", "transformer", "gpt"
  QString optimizer;      // "sgd", "adam", "adamw"
  double learningRate = 0.0;
  int batch = 0;
  bool useSteps = false;  // false: `epochs` counts, true: `steps` counts
  int epochs = 0;
  int steps = 0;
  int seed = 0;
  QString recipe;         // "fp32", "fp16", "mixed-fp16", "mixed-bf16", "fp8", "custom"
  QString lossScaling;    // "none", "static", "dynamic"
  double initialScale = 0.0;
  double growthFactor = 0.0;
  double backoffFactor = 0.0;
  int growthInterval = 0;
  QString backend;        // "auto", "cpu", "cuda"
  int threads = 0;        // engine CPU threads (RunConfig::threads; 0 = all cores)
};

// GUI thread only.
class SetupPanel : public QWidget {
  Q_OBJECT

 public:
  explicit SetupPanel(QWidget* parent = nullptr);

  SetupSettings settings() const;

  // The run config the panel describes, on top of `base` (which keeps the
  // keys the panel has no control for: momentum, schedule, clip, ...).
  // Loss-scaler settings are marked set only when they differ from the
  // recipe's own. Not validated here (Trainer::add_run validates).
  engine::RunConfig toConfig(const engine::RunConfig& base = {}) const;
  // Shows `config` in the controls (a --config file, the command line).
  // Values a control cannot show (a dataset folder) are shown as they are.
  void applyConfig(const engine::RunConfig& config);
  void setRecipe(const QString& recipe);

  // Chooses a folder of IDX files as the dataset, checked now: a folder
  // without the four MNIST-format files is refused (the previous choice
  // stays) and *error says which files are missing. The "folder…" item
  // calls it with the folder the user picked, and shows the error.
  bool setDatasetFolder(const QString& dir, QString* error = nullptr);
  // Chooses a UTF-8 text file as the dataset ("text:PATH"), checked now as
  // the engine reads it (plan_text_dataset): an empty, binary or too varied
  // file is refused with the engine's one line in *error, and the previous
  // choice stays. The "text file…" item calls it with the file picked.
  bool setDatasetTextFile(const QString& path, QString* error = nullptr);
  // "" when `dir` holds train/t10k images and labels (IDX, optionally .gz);
  // else one line naming the folder and what is missing.
  static QString datasetFolderProblem(const QString& dir);

  // Models the selected dataset cannot feed (a cnn or transformer on 2-D
  // spirals) are disabled in the model combo, their tooltip says why.
  bool modelEnabled(const QString& model) const;

  // The engine thread count used when nothing else says: 0, all cores
  // (the engine's own default, RunConfig::threads); the reason is beside
  // the definition.
  static int defaultThreads();

  // The recipes in the order the combo lists them.
  static QStringList recipes();

  // The loss scaler as the controls show it (mode, scale, factors, interval).
  engine::LossScalerConfig lossScaler() const;

 signals:
  void settingsChanged();
  // The user changed a loss-scaler control (not a recipe or a config
  // filling them in): a live run may take the new scaler at its next step.
  void lossScalerEdited();

 private:
  void onDatasetActivated(int index);
  void onModelChanged(const QString& model);
  void onSizeChosen(const QString& size);
  void updateSizeChoice();
  void onRecipeChanged(const QString& recipe);
  void onDurationUnitChanged(int index);
  void updateScalerControls();
  void updateModelChoices();
  void setUpBackendChoice();

  QComboBox* m_dataset = nullptr;
  int m_lastDatasetIndex = 0;
  QComboBox* m_model = nullptr;
  GptFields* m_gpt = nullptr;  // shown while the model is gpt
  SizeFields* m_sizeFields = nullptr;  // the Size choice and the mlp's, cnn's, transformer's shape
  QString m_shownModel;        // the model whose optimizer defaults the controls may hold
  QComboBox* m_optimizer = nullptr;
  QDoubleSpinBox* m_learningRate = nullptr;
  QLabel* m_learningRateNote = nullptr;  // a typed value the range refused
  double m_learningRateKept = 0.0;        // the value before that edit
  QSpinBox* m_batch = nullptr;
  QComboBox* m_durationUnit = nullptr;
  QSpinBox* m_duration = nullptr;
  int m_epochs = 5;
  int m_steps = 2000;
  QSpinBox* m_seed = nullptr;
  QComboBox* m_recipe = nullptr;
  QComboBox* m_scalerMode = nullptr;
  QDoubleSpinBox* m_initialScale = nullptr;
  QDoubleSpinBox* m_growthFactor = nullptr;
  QDoubleSpinBox* m_backoff = nullptr;
  QSpinBox* m_growthInterval = nullptr;
  QComboBox* m_backend = nullptr;
  QLabel* m_backendNote = nullptr;
  QSpinBox* m_threads = nullptr;
  int m_filling = 0;  // > 0 while the panel sets its own scaler controls
};
