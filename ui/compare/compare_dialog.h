// CompareDialog: picks the recipes of a comparison (default fp32, fp16,
// mixed-fp16). They run side by side in one Trainer on the same seed:
// same initial weights, same batches — differences come from precision.
#pragma once

#include <QDialog>
#include <QStringList>

class QDialogButtonBox;
class QLabel;
class QListWidget;

// GUI thread only.
class CompareDialog : public QDialog {
  Q_OBJECT

 public:
  static QStringList defaultRecipes();
  // One line saying what a recipe preset does (every name of
  // engine::recipe_names() has one; "" for an unknown name).
  static QString describeRecipe(const QString& recipe);

  // `checked`: the recipes ticked at first; `seed` is shown, it is shared.
  explicit CompareDialog(const QStringList& checked, int seed, QWidget* parent = nullptr);

  // The ticked recipes, in the order listed.
  QStringList recipes() const;
  void setRecipes(const QStringList& recipes);

 private:
  void updateOk();

  QListWidget* m_list = nullptr;
  QDialogButtonBox* m_buttons = nullptr;
  QLabel* m_note = nullptr;
};
