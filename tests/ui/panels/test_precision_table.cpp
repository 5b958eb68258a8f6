// tests/ui/panels: the per-layer precision table offers block formats
// (MXFP8, MXFP6, MXFP4, NVFP4) as the compute format of GEMM layers only,
// never as storage or accumulate, never the element formats (FP6, FP4,
// E8M0); and no edit gives a layer a precision the engine refuses
// (engine::precision_problem), the grad format included.
#include <gtest/gtest.h>

#include <QComboBox>

#include "amp/recipe.h"
#include "nn/layer.h"
#include "nn/model.h"
#include "panels/layer_rows.h"
#include "panels/precision_table.h"
#include "panels/precision_table_model.h"
#include "../ui_test_support.h"

namespace {

using engine::Format;

bool hasAnyBlock(const QVector<Format>& c) {
  for (Format f : c)
    if (engine::is_block_format(f)) return true;
  return false;
}

bool hasAnyElement(const QVector<Format>& c) {
  for (Format f : c)
    if (engine::is_element_format(f)) return true;
  return false;
}

engine::RunConfig transformer(const std::string& recipe) {
  engine::RunConfig c = ui_test::config(recipe);
  c.dataset = "fashion-mnist";  // 1x28x28: no data is loaded for the rows
  c.model = "transformer";
  return c;
}

}  // namespace

TEST(PrecisionTableChoices, BlockFormatsOnlyInTheComputeColumnOfGemmRows) {
  using M = PrecisionTableModel;
  for (const char* kind : {"linear", "patch_embed", "conv2d"}) {
    const QVector<Format> compute = M::choices(M::Compute, QString::fromLatin1(kind));
    for (Format f : engine::kBlockFormats) EXPECT_TRUE(compute.contains(f)) << kind << " " << engine::format_name(f);
    for (Format f : engine::kAllFormats) EXPECT_TRUE(compute.contains(f)) << kind << " " << engine::format_name(f);
    EXPECT_FALSE(hasAnyBlock(M::choices(M::Storage, QString::fromLatin1(kind)))) << kind;
    EXPECT_FALSE(hasAnyBlock(M::choices(M::Accumulate, QString::fromLatin1(kind)))) << kind;
  }
  for (const char* kind : {"layernorm", "softmax", "attention_scores", "attention_values", "relu", "gelu",
                           "maxpool2d", "flatten", "mean_pool", ""}) {
    for (int column : {M::Compute, M::Storage, M::Accumulate})
      EXPECT_FALSE(hasAnyBlock(M::choices(column, QString::fromLatin1(kind)))) << kind << " column " << column;
  }
  for (const std::string& kind : engine::leaf_kinds())
    for (int column : {M::Compute, M::Storage, M::Accumulate})
      EXPECT_FALSE(hasAnyElement(M::choices(column, QString::fromStdString(kind)))) << kind;
  // The kind-less overload stays what it was.
  EXPECT_FALSE(hasAnyBlock(M::choices(M::Compute)));
}

TEST(PrecisionTableChoices, RowsKnowTheirKindAndTheEditorOffersTheirChoices) {
  ui_test::ensureApplication();
  const QVector<PrecisionTableRow> rows = layerRowsFor(transformer("mixed-fp16"));
  ASSERT_FALSE(rows.isEmpty());
  PrecisionTable table;
  PrecisionTableModel* model = table.precisionModel();
  model->setRows(rows);
  int patch = -1, norm = -1;
  for (int r = 0; r < rows.size(); ++r) {
    if (rows[r].kind == QLatin1String("patch_embed")) patch = r;
    if (rows[r].kind == QLatin1String("layernorm") && norm < 0) norm = r;
  }
  ASSERT_GE(patch, 0);
  ASSERT_GE(norm, 0);
  auto editorItems = [&](int row, int column) {
    const QModelIndex index = model->index(row, column);
    QWidget* editor = table.itemDelegateForIndex(index)->createEditor(table.viewport(), {}, index);
    QStringList items;
    auto* combo = qobject_cast<QComboBox*>(editor);
    for (int i = 0; combo && i < combo->count(); ++i) items << combo->itemText(i);
    delete editor;
    return items;
  };
  EXPECT_TRUE(editorItems(patch, PrecisionTableModel::Compute).contains(QStringLiteral("NVFP4")));
  EXPECT_TRUE(editorItems(patch, PrecisionTableModel::Compute).contains(QStringLiteral("MXFP6-E3M2")));
  EXPECT_FALSE(editorItems(patch, PrecisionTableModel::Storage).contains(QStringLiteral("MXFP8")));
  EXPECT_FALSE(editorItems(norm, PrecisionTableModel::Compute).contains(QStringLiteral("MXFP4")));
  EXPECT_FALSE(editorItems(patch, PrecisionTableModel::Compute).contains(QStringLiteral("FP4-E2M1")));

  // setData refuses what the row cannot take.
  EXPECT_FALSE(model->setData(model->index(norm, PrecisionTableModel::Compute), QStringLiteral("mxfp4")));
  EXPECT_FALSE(model->setData(model->index(patch, PrecisionTableModel::Storage), QStringLiteral("mxfp8")));
  EXPECT_FALSE(model->setData(model->index(patch, PrecisionTableModel::Accumulate), QStringLiteral("nvfp4")));
  EXPECT_FALSE(model->setData(model->index(patch, PrecisionTableModel::Compute), QStringLiteral("e2m1")));
  EXPECT_FALSE(model->setData(model->index(patch, PrecisionTableModel::Compute), QStringLiteral("e8m0")));
  // A block compute format brings block gradients; leaving it, the
  // gradients follow the new compute format.
  ASSERT_TRUE(model->setData(model->index(patch, PrecisionTableModel::Compute), QStringLiteral("mxfp4")));
  EXPECT_EQ(model->rows()[patch].precision.compute, Format::MXFP4);
  EXPECT_EQ(model->rows()[patch].precision.grad, Format::MXFP4);
  EXPECT_TRUE(model->index(patch, PrecisionTableModel::Compute)
                  .data(Qt::ToolTipRole)
                  .toString()
                  .contains(QStringLiteral("Block-scaled")));
  ASSERT_TRUE(model->setData(model->index(patch, PrecisionTableModel::Compute), QStringLiteral("fp8-e4m3")));
  EXPECT_EQ(model->rows()[patch].precision.grad, Format::E5M2);
  EXPECT_TRUE(model->index(patch, PrecisionTableModel::Compute)
                  .data(Qt::ToolTipRole)
                  .toString()
                  .contains(QStringLiteral("Gradients in FP8-E5M2")));
  ASSERT_TRUE(model->setData(model->index(patch, PrecisionTableModel::Compute), QStringLiteral("nvfp4")));
  ASSERT_TRUE(model->setData(model->index(patch, PrecisionTableModel::Compute), QStringLiteral("tf32")));
  EXPECT_EQ(model->rows()[patch].precision.grad, Format::FP32);
  // Non-block changes keep the grad format as before.
  ASSERT_TRUE(model->setData(model->index(patch, PrecisionTableModel::Compute), QStringLiteral("bf16")));
  EXPECT_EQ(model->rows()[patch].precision.grad, Format::FP32);
}

// Every choice the table offers, from every recipe's starting point, is a
// precision the engine takes (the UI cannot ask for one it refuses).
TEST(PrecisionTableChoices, NoEditGivesAPrecisionTheEngineRefuses) {
  ui_test::ensureApplication();
  for (const char* modelName : {"transformer", "cnn", "mlp"}) {
    std::unique_ptr<engine::Model> net = engine::build_model(modelName, {1, 28, 28}, 10);
    std::map<std::string, engine::Layer*> leaves;
    for (engine::Layer* l : net->leaves()) leaves[l->name()] = l;
    for (const char* recipe : {"mixed-fp16", "fp8", "mxfp8", "mxfp4", "nvfp4"}) {
      engine::RunConfig c = transformer(recipe);
      c.model = modelName;
      PrecisionTableModel model;
      model.setRows(layerRowsFor(c));
      ASSERT_GT(model.rowCount(), 0);
      const QVector<PrecisionTableRow> rows = model.rows();
      for (const PrecisionTableRow& start : rows) {
        engine::Layer* leaf = leaves.at(start.layer.toStdString());
        EXPECT_EQ(start.kind, QString::fromLatin1(leaf->kind()));
        // The recipe's own precision is one the engine takes.
        EXPECT_EQ(engine::precision_problem(*leaf, start.precision), "") << recipe;
        for (int column : {PrecisionTableModel::Compute, PrecisionTableModel::Storage, PrecisionTableModel::Accumulate}) {
          for (Format f : PrecisionTableModel::choices(column, start.kind)) {
            // From the recipe's precision, then from a block compute one.
            for (const char* from : {"", "mxfp8"}) {
              model.setRows(QVector<PrecisionTableRow>{start});
              if (*from && engine::takes_block_formats(leaf->kind())) {
                ASSERT_TRUE(model.setData(model.index(0, PrecisionTableModel::Compute), QString::fromLatin1(from)));
              }
              ASSERT_TRUE(model.setData(model.index(0, column), QString::fromLatin1(engine::format_key(f))))
                  << modelName << " " << recipe << " " << start.layer.toStdString() << " " << engine::format_name(f);
              EXPECT_EQ(engine::precision_problem(*leaf, model.rows()[0].precision), "")
                  << modelName << " " << recipe << " column " << column << " " << engine::format_name(f);
            }
          }
        }
      }
    }
  }
}

// The gpt's leaves at 1280x720: the layer column is narrow, so a name is
// elided at its start (where every block's names agree) and whole in the
// cell's tooltip, with its kind.
TEST(PrecisionTableChoices, EveryGptLeafIsNamedWholeInItsTooltip) {
  ui_test::ensureApplication();
  engine::RunConfig c = ui_test::config("mixed-bf16");
  c.model = "gpt";
  c.dataset = "spirals";  // two outputs: a two-token vocabulary for the shapes
  c.depth = 2;
  c.width = 16;
  c.heads = 2;
  c.context = 8;
  const QVector<PrecisionTableRow> rows = layerRowsFor(c);
  ASSERT_EQ(rows.size(), 2 + 2 * 10 + 2);
  PrecisionTable table;
  EXPECT_EQ(table.textElideMode(), Qt::ElideLeft);
  PrecisionTableModel* model = table.precisionModel();
  model->setRows(rows);
  for (int r = 0; r < rows.size(); ++r) {
    const QString tip = model->data(model->index(r, PrecisionTableModel::Layer), Qt::ToolTipRole).toString();
    EXPECT_EQ(tip, QStringLiteral("%1 (%2)").arg(rows[r].layer, rows[r].kind));
    EXPECT_FALSE(rows[r].kind.isEmpty()) << rows[r].layer.toStdString();
  }
  EXPECT_EQ(rows.front().layer, QStringLiteral("embed.tok"));
  EXPECT_EQ(rows[5].layer, QStringLiteral("blocks.0.attn.softmax"));
  EXPECT_EQ(rows.back().layer, QStringLiteral("head"));
}
