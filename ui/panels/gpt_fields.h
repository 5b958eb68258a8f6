// GptFields: the setup panel's "Language model" group, the gpt's shape and its two mitigations.
#pragma once

#include <QGroupBox>

#include "train/run_config.h"

class QCheckBox;
class QDoubleSpinBox;
class QSpinBox;

// Layers, width, heads, context (RunConfig::depth, width, heads, context),
// qk-norm and the z-loss coefficient, with the engine's defaults and
// ranges. The panel shows the group only while the model is gpt. GUI thread.
class GptFields : public QGroupBox {
  Q_OBJECT

 public:
  explicit GptFields(QWidget* parent = nullptr);

  // Writes the fields into `c` (the other keys stay).
  void apply(engine::RunConfig& c) const;
  // Shows `c`'s gpt settings.
  void show(const engine::RunConfig& c);
  using QGroupBox::show;

 signals:
  void changed();

 private:
  QSpinBox* m_layers = nullptr;
  QSpinBox* m_width = nullptr;
  QSpinBox* m_heads = nullptr;
  QSpinBox* m_context = nullptr;
  QCheckBox* m_qkNorm = nullptr;
  QDoubleSpinBox* m_zLoss = nullptr;
};
