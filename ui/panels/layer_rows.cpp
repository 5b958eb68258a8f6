// Layer rows: the engine's layer catalog (describe_layers) as table rows.
#include "panels/layer_rows.h"

#include <QStringList>

#include "train/layer_catalog.h"

namespace {

QString joinShape(const engine::Shape& s, const char* sep) {
  QStringList parts;
  for (std::int64_t d : s) parts << QString::number(d);
  return parts.join(QString::fromLatin1(sep));
}

}  // namespace

QVector<PrecisionTableRow> layerRowsFor(const engine::RunConfig& config) {
  QVector<PrecisionTableRow> rows;
  for (const engine::LayerInfo& l : engine::describe_layers(config).layers) {
    PrecisionTableRow row;
    row.layer = QString::fromStdString(l.name);
    row.kind = QString::fromStdString(l.kind);
    row.precision = l.precision;
    row.recipePrecision = l.recipe_precision;
    row.parameters = l.parameters;
    // A layer without weights is shown by what it outputs ("→ 16x64").
    row.shape = l.weight.empty() ? QStringLiteral("→ %1").arg(joinShape(l.output, "x")) : joinShape(l.weight, " x ");
    row.memoryBytes = l.state_bytes + l.activation_bytes;
    rows << row;
  }
  return rows;
}
