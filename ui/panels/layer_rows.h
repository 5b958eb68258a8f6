// Layer rows: the per-layer precision table's rows for a run config — the
// model's leaves as the engine builds them, each with the recipe's
// precision, parameter count and memory in real storage widths.
#pragma once

#include <QVector>

#include "panels/precision_table_model.h"
#include "train/run_config.h"

// One row per leaf of engine::describe_layers(config) (shapes only; no data
// is loaded), with its recipe plus config.layers applied. Throws
// std::runtime_error (one line) when the model does not fit the data set (a
// cnn on 2-D spirals). Takes a few milliseconds.
QVector<PrecisionTableRow> layerRowsFor(const engine::RunConfig& config);
