// Layer rows: the per-layer precision table's rows for a run config — the
// model's leaves as the engine builds them, each with the recipe's
// precision, parameter count and memory in real storage widths.
#pragma once

#include <QVector>

#include "panels/precision_table_model.h"
#include "train/run_config.h"

// Builds the model of `config` (shapes only; no data is loaded) and applies
// its recipe plus config.layers. Throws std::runtime_error (one line) when
// the model does not fit the data set (a cnn on 2-D spirals). GUI thread;
// takes a few milliseconds.
QVector<PrecisionTableRow> layerRowsFor(const engine::RunConfig& config);
