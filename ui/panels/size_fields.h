// SizeFields: the setup panel's "Model size" group, a size (default, GPU) and the shape of the chosen model.
#pragma once

#include <QGroupBox>
#include <QString>

#include "train/run_config.h"

class QComboBox;
class QFormLayout;
class QLineEdit;
class QSpinBox;

// The Size choice ("default", "GPU"; "custom" when the fields match
// neither) and the fields of the model's shape: the mlp's hidden widths,
// the cnn's channels per conv stage, the transformer's depth, width and
// heads (the gpt's shape is in GptFields). Choosing a size asks the panel
// to size the whole config (sizeChosen: the engine's apply_size, which
// also sets the batch and the gpt's fields). GUI thread.
class SizeFields : public QGroupBox {
  Q_OBJECT

 public:
  explicit SizeFields(QWidget* parent = nullptr);

  // Shows the rows of `model`'s shape (none for the gpt: GptFields).
  void setModel(const QString& model);
  // Writes c.model's shape fields (mlp, cnn, transformer) into `c`; a
  // field at the model's default is left unset, so config.json stays as it
  // was. Text that is not a list of whole numbers leaves c's list as it is.
  void apply(engine::RunConfig& c) const;
  // Shows c's shapes (each model's fields: c's where it is that model, else
  // the model's defaults).
  void show(const engine::RunConfig& c);
  using QGroupBox::show;
  // Shows `size` ("default", "gpu" or "" for custom) without sizeChosen.
  void showSize(const std::string& size);
  QString size() const;  // "default", "gpu" or "custom"

 signals:
  void changed();
  // The user chose a size ("default" or "gpu").
  void sizeChosen(const QString& size);

 private:
  QComboBox* m_size = nullptr;
  QFormLayout* m_form = nullptr;
  QLineEdit* m_widths = nullptr;
  QLineEdit* m_channels = nullptr;
  QSpinBox* m_depth = nullptr;
  QSpinBox* m_width = nullptr;
  QSpinBox* m_heads = nullptr;
};
