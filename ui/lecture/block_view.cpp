// BlockView: the controls, the two sides' headings and strips, and one
// table per block; numbers from compareBlocks (engine::block_encode_reference
// and engine::encode / decode).
#include "lecture/block_view.h"

#include <QButtonGroup>
#include <QComboBox>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLocale>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QRadioButton>
#include <QRegularExpression>
#include <QSignalBlocker>
#include <QSlider>
#include <QSpinBox>
#include <QStackedWidget>
#include <QTableWidget>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "charts/chart_style.h"
#include "charts/number_text.h"
#include "lecture/block_strip.h"
#include "numeric/block.h"
#include "numeric/inspect.h"
#include "session/run_store.h"

namespace {

constexpr int kSliderSteps = 400;  // 10^(position / 100): 1 .. 10^4
constexpr double kMaxFactor = 1e4;

QString name(engine::Format f) { return QString::fromLatin1(engine::format_name(f)); }
QString decimal(float v) { return QString::fromStdString(engine::shortest_decimal(v)); }

QTableWidgetItem* item(bool number) {
  auto* i = new QTableWidgetItem;
  i->setFlags(Qt::ItemIsEnabled | Qt::ItemIsSelectable);
  i->setTextAlignment((number ? Qt::AlignRight : Qt::AlignHCenter) | Qt::AlignVCenter);
  return i;
}

}  // namespace

BlockView::BlockView(QWidget* parent) : QWidget(parent) {
  setObjectName(QStringLiteral("blockView"));

  // --- controls ---
  m_formatCombo = new QComboBox(this);
  m_formatCombo->setObjectName(QStringLiteral("blockFormat"));
  for (engine::Format f : engine::kBlockFormats) {
    const engine::BlockInfo& bi = engine::block_info(f);
    m_formatCombo->addItem(name(f), static_cast<int>(f));
    m_formatCombo->setItemData(m_formatCombo->count() - 1,
                               tr("%1 × %2 and one %3 scale per block%4: %5 bits per value")
                                   .arg(bi.block)
                                   .arg(name(bi.element), name(bi.scale),
                                        bi.tensor_scale ? tr(", plus one FP32 scale per tensor") : QString())
                                   .arg(bi.bits_per_element),
                               Qt::ToolTipRole);
  }
  connect(m_formatCombo, &QComboBox::currentIndexChanged, this, [this] {
    if (!m_updating) setFormat(static_cast<engine::Format>(m_formatCombo->currentData().toInt()));
  });
  m_typedRadio = new QRadioButton(tr("typed"), this);
  m_typedRadio->setObjectName(QStringLiteral("blockSourceTyped"));
  m_liveRadio = new QRadioButton(tr("from a live run"), this);
  m_liveRadio->setObjectName(QStringLiteral("blockSourceLive"));
  auto* sources = new QButtonGroup(this);
  sources->addButton(m_typedRadio);
  sources->addButton(m_liveRadio);
  m_typedRadio->setChecked(true);
  connect(m_typedRadio, &QRadioButton::toggled, this, [this](bool on) {
    if (!m_updating) setSource(on ? Source::Typed : Source::Live);
  });

  m_outlierSpin = new QSpinBox(this);
  m_outlierSpin->setObjectName(QStringLiteral("outlierElement"));
  m_outlierSpin->setToolTip(tr("The element of block 1 the outlier factor multiplies (a click on a cell of "
                               "block 1 picks it too)"));
  connect(m_outlierSpin, &QSpinBox::valueChanged, this, [this](int v) {
    if (m_updating) return;
    m_outlier = v - 1;
    m_outlierChosen = true;
    recompute();
  });
  m_slider = new QSlider(Qt::Horizontal, this);
  m_slider->setObjectName(QStringLiteral("outlierSlider"));
  m_slider->setRange(0, kSliderSteps);
  m_slider->setPageStep(50);
  m_slider->setMinimumWidth(220);
  m_slider->setToolTip(tr("Multiplies the chosen element by 1 to 10,000 (logarithmic)"));
  connect(m_slider, &QSlider::valueChanged, this, [this](int v) {
    if (m_updating) return;
    m_factor = std::pow(10.0, v / 100.0);
    recompute();
  });
  m_factorLabel = new QLabel(this);
  m_factorLabel->setObjectName(QStringLiteral("outlierFactor"));
  m_factorLabel->setMinimumWidth(fontMetrics().horizontalAdvance(QStringLiteral("× 10000")) + 8);
  QFont bold = font();
  bold.setBold(true);
  m_factorLabel->setFont(bold);

  auto* controls = new QHBoxLayout;
  controls->addWidget(new QLabel(tr("Block format"), this));
  controls->addWidget(m_formatCombo);
  controls->addSpacing(16);
  controls->addWidget(new QLabel(tr("Values:"), this));
  controls->addWidget(m_typedRadio);
  controls->addWidget(m_liveRadio);
  controls->addStretch(1);
  controls->addWidget(new QLabel(tr("Outlier: element"), this));
  controls->addWidget(m_outlierSpin);
  controls->addWidget(new QLabel(tr("of block 1"), this));
  controls->addWidget(m_slider, 1);
  controls->addWidget(m_factorLabel);

  // --- the values: typed, or a live run's ---
  m_sourceStack = new QStackedWidget(this);
  auto* typedPage = new QWidget(m_sourceStack);
  m_edit = new QPlainTextEdit(typedPage);
  m_edit->setObjectName(QStringLiteral("blockValues"));
  m_edit->setToolTip(tr("Numbers separated by spaces, commas or new lines (paste a column from a spreadsheet): "
                        "the first %1 make the two blocks").arg(64));
  // Four lines: the 64 example values, 16 a line, without scrolling.
  m_edit->setFixedHeight(fontMetrics().lineSpacing() * 4 + 14);
  m_editNote = new QLabel(typedPage);
  m_editNote->setObjectName(QStringLiteral("blockValuesNote"));
  m_editNote->setWordWrap(true);
  auto* example = new QPushButton(tr("Example values"), typedPage);
  example->setObjectName(QStringLiteral("blockExample"));
  example->setToolTip(tr("Sixty-four values like a layer's weights (normal, sd 0.05)"));
  example->setAutoDefault(false);
  connect(example, &QPushButton::clicked, this, [this] {
    m_edit->setPlainText(exampleValuesText());
  });
  connect(m_edit, &QPlainTextEdit::textChanged, this, [this] {
    if (!m_updating) setValuesText(m_edit->toPlainText());
  });
  auto* typedSide = new QVBoxLayout;
  typedSide->addWidget(example);
  typedSide->addWidget(m_editNote, 1);
  auto* typedLayout = new QHBoxLayout(typedPage);
  typedLayout->setContentsMargins(0, 0, 0, 0);
  typedLayout->addWidget(m_edit, 1);
  typedLayout->addLayout(typedSide);
  m_sourceStack->addWidget(typedPage);

  auto* livePage = new QWidget(m_sourceStack);
  m_liveLabel = new QLabel(livePage);
  m_liveLabel->setObjectName(QStringLiteral("blockLiveSource"));
  m_liveLabel->setWordWrap(true);
  m_runCombo = new QComboBox(livePage);
  m_runCombo->setObjectName(QStringLiteral("blockLiveRun"));
  m_layerCombo = new QComboBox(livePage);
  m_layerCombo->setObjectName(QStringLiteral("blockLiveLayer"));
  m_tensorCombo = new QComboBox(livePage);
  m_tensorCombo->setObjectName(QStringLiteral("blockLiveTensor"));
  m_tensorCombo->addItem(tr("weight"));
  m_tensorCombo->addItem(tr("weight gradient (unscaled)"));
  m_runCombo->setSizeAdjustPolicy(QComboBox::AdjustToContents);
  m_layerCombo->setSizeAdjustPolicy(QComboBox::AdjustToContents);
  for (QComboBox* c : {m_runCombo, m_layerCombo, m_tensorCombo})
    connect(c, &QComboBox::currentIndexChanged, this, [this] {
      if (m_updating) return;
      refreshLive();
    });
  auto* pickers = new QHBoxLayout;
  pickers->addWidget(new QLabel(tr("Run"), livePage));
  pickers->addWidget(m_runCombo);
  pickers->addSpacing(12);
  pickers->addWidget(new QLabel(tr("Layer"), livePage));
  pickers->addWidget(m_layerCombo);
  pickers->addSpacing(12);
  pickers->addWidget(m_tensorCombo);
  pickers->addStretch(1);
  auto* liveLayout = new QVBoxLayout(livePage);
  liveLayout->setContentsMargins(0, 0, 0, 0);
  liveLayout->addLayout(pickers);
  liveLayout->addWidget(m_liveLabel, 1);
  m_sourceStack->addWidget(livePage);
  m_sourceStack->setFixedHeight(m_edit->height() + 4);

  // --- the picture: each side's heading, its two strips, its summary ---
  auto* picture = new QGridLayout;
  picture->setHorizontalSpacing(16);
  picture->setVerticalSpacing(3);
  QFont heading = font();
  heading.setBold(true);
  heading.setPointSizeF(heading.pointSizeF() * 1.2);
  QFont summaryFont = font();
  summaryFont.setPointSizeF(summaryFont.pointSizeF() * 1.1);
  for (int side = 0; side < 2; ++side) {
    const QString key = side == 0 ? QStringLiteral("block") : QStringLiteral("tensor");
    m_sideTitle[side] = new QLabel(this);
    m_sideTitle[side]->setFont(heading);
    m_sideTitle[side]->setObjectName(QStringLiteral("%1Title").arg(key));
    m_sideScale[side] = new QLabel(this);
    m_sideScale[side]->setObjectName(QStringLiteral("%1Scale").arg(key));
    m_sideScale[side]->setWordWrap(true);
    m_sideSummary[side] = new QLabel(this);
    m_sideSummary[side]->setObjectName(QStringLiteral("%1Summary").arg(key));
    m_sideSummary[side]->setFont(summaryFont);
    picture->addWidget(m_sideTitle[side], 0, side + 1);
    picture->addWidget(m_sideScale[side], 1, side + 1);
    picture->addWidget(m_sideSummary[side], 4, side + 1);
  }
  for (int b = 0; b < 2; ++b) {
    BlockPanel& p = m_blocks[b];
    p.stripLabel = new QLabel(tr("Block %1").arg(b + 1), this);
    p.stripLabel->setFont(bold);
    p.blockStrip = new BlockStrip(this);
    p.blockStrip->setObjectName(QStringLiteral("blockStrip%1").arg(b + 1));
    p.tensorStrip = new BlockStrip(this);
    p.tensorStrip->setObjectName(QStringLiteral("tensorStrip%1").arg(b + 1));
    for (BlockStrip* s : {p.blockStrip, p.tensorStrip})
      connect(s, &BlockStrip::elementClicked, this, [this](int index) {
        const int bs = blockSize();
        const int b = index / bs;
        if (b == 0) setOutlier(index, m_factor);
        if (b < 2) {
          m_blocks[b].table->selectRow(index - b * bs);
          m_blocks[b].table->scrollToItem(m_blocks[b].table->item(index - b * bs, 0));
        }
      });
    picture->addWidget(p.stripLabel, 2 + b, 0);
    picture->addWidget(p.blockStrip, 2 + b, 1);
    picture->addWidget(p.tensorStrip, 2 + b, 2);
  }
  picture->setColumnStretch(1, 1);
  picture->setColumnStretch(2, 1);
  auto* legend = new QLabel(
      tr("Each cell is one value: <b style='color:#3CA55C'>green</b> exact, through "
         "<b style='color:#C9A800'>yellow</b> to <b style='color:#E0781E'>amber</b> as the relative error grows "
         "to 100%, <b style='color:%1'>red</b> flushed to zero, <span style='color:#909090'>grey</span> an input "
         "of 0; the outlined cell is the outlier.")
          .arg(chart_style::kAlarm.name()),
      this);
  legend->setObjectName(QStringLiteral("blockLegend"));
  legend->setWordWrap(true);
  m_outlierNote = new QLabel(this);
  m_outlierNote->setObjectName(QStringLiteral("outlierNote"));
  picture->addWidget(legend, 5, 1);
  picture->addWidget(m_outlierNote, 5, 2);

  // --- one table per block ---
  const QStringList headers = {tr("#"),           tr("input"),         tr("block: code"),
                               tr("block: value"), tr("block: error"),  tr("per-tensor: code"),
                               tr("per-tensor: value"), tr("per-tensor: error")};
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(controls);
  layout->addWidget(m_sourceStack);
  layout->addLayout(picture);
  for (int b = 0; b < 2; ++b) {
    BlockPanel& p = m_blocks[b];
    p.caption = new QLabel(this);
    p.caption->setObjectName(QStringLiteral("blockCaption%1").arg(b + 1));
    p.caption->setFont(bold);
    p.caption->setWordWrap(true);
    p.table = new QTableWidget(0, ColumnCount, this);
    p.table->setObjectName(QStringLiteral("blockTable%1").arg(b + 1));
    p.table->setHorizontalHeaderLabels(headers);
    p.table->verticalHeader()->setVisible(false);
    p.table->verticalHeader()->setDefaultSectionSize(fontMetrics().height() + 6);
    p.table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    p.table->setSelectionBehavior(QAbstractItemView::SelectRows);
    p.table->setSelectionMode(QAbstractItemView::SingleSelection);
    p.table->setWordWrap(false);
    QHeaderView* h = p.table->horizontalHeader();
    h->setSectionResizeMode(QHeaderView::Stretch);
    h->setSectionResizeMode(Index, QHeaderView::Fixed);
    h->resizeSection(Index, fontMetrics().horizontalAdvance(QStringLiteral("64 ◆")) + 14);
    p.table->setMinimumHeight(fontMetrics().height() * 5);
    layout->addWidget(p.caption);
    layout->addWidget(p.table, 1);
  }

  m_updating = true;
  m_formatCombo->setCurrentIndex(m_formatCombo->findData(static_cast<int>(m_format)));
  m_updating = false;
  m_outlierSpin->setRange(1, blockSize());
  m_factorLabel->setText(factorText(m_factor));
  m_edit->setPlainText(exampleValuesText());  // setValuesText through textChanged
  refreshLive();
}

int BlockView::blockSize() const { return engine::block_info(m_format).block; }

QString BlockView::exampleValuesText() {
  // A fixed sample (a 64-bit LCG and Box-Muller), so the example is the
  // same in every session and on every machine.
  std::uint64_t s = 0x2545F4914F6CDD1DULL;
  auto uniform = [&s] {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (static_cast<double>(s >> 11) + 0.5) / 9007199254740992.0;
  };
  QStringList lines, line;
  for (int i = 0; i < 32; ++i) {
    const double r = std::sqrt(-2.0 * std::log(uniform())), t = 2.0 * M_PI * uniform();
    for (double z : {r * std::cos(t), r * std::sin(t)}) {
      line << QString::number(0.05 * z, 'g', 3);
      if (line.size() == 16) {
        lines << line.join(QLatin1Char(' '));
        line.clear();
      }
    }
  }
  return lines.join(QLatin1Char('\n'));
}

void BlockView::setRunStore(RunStore* store) {
  if (m_store == store) return;
  if (m_store) disconnect(m_store, nullptr, this, nullptr);
  m_store = store;
  if (m_store)
    connect(m_store, &RunStore::inspected, this, [this](int id) {
      m_latestRun = id;
      refreshLive();
    });
  refreshLive();
}

void BlockView::setFormat(engine::Format f) {
  if (!engine::is_block_format(f)) return;
  m_format = f;
  m_updating = true;
  m_formatCombo->setCurrentIndex(m_formatCombo->findData(static_cast<int>(f)));
  m_outlierSpin->setRange(1, blockSize());
  m_updating = false;
  if (m_outlier >= blockSize()) m_outlierChosen = false;
  if (!m_outlierChosen) pickOutlierDefault();
  if (m_source == Source::Live)
    loadLive();  // the live note names the format
  else
    recompute();
}

void BlockView::setSource(Source s) {
  m_source = s;
  m_updating = true;
  (s == Source::Typed ? m_typedRadio : m_liveRadio)->setChecked(true);
  m_updating = false;
  m_sourceStack->setCurrentIndex(s == Source::Typed ? 0 : 1);
  m_outlierChosen = false;
  if (s == Source::Typed)
    setBase(m_typed, 0.0);
  else
    loadLive();
}

bool BlockView::setValuesText(const QString& text) {
  static const QRegularExpression separators(QStringLiteral("[\\s,;]+"));
  const QStringList tokens = text.split(separators, Qt::SkipEmptyParts);
  std::vector<float> values;
  values.reserve(static_cast<std::size_t>(tokens.size()));
  for (int i = 0; i < tokens.size(); ++i) {
    float v = 0;
    if (!parseBlockNumber(tokens[i], &v)) {
      m_editNote->setText(tr("<span style='color:%1'>value %2, “%3”, is not a number</span>")
                              .arg(chart_style::kAlarmLine.name())
                              .arg(i + 1)
                              .arg(tokens[i].toHtmlEscaped()));
      return false;
    }
    values.push_back(v);
  }
  if (m_edit->toPlainText() != text) {
    m_updating = true;
    m_edit->setPlainText(text);
    m_updating = false;
  }
  const bool wasTyped = m_source == Source::Typed;
  m_typed = values;
  if (!wasTyped) {
    setSource(Source::Typed);  // takes m_typed
  } else {
    m_outlierChosen = m_outlierChosen && m_outlier < static_cast<int>(values.size());
    setBase(m_typed, 0.0);
  }
  return true;
}

void BlockView::setValues(const std::vector<float>& values) {
  QStringList parts;
  for (float v : values) parts << decimal(v);
  setValuesText(parts.join(QLatin1Char(' ')));
}

bool BlockView::selectLive(int storeId, const QString& layer, bool gradient) {
  if (!m_store || storeId < 0 || storeId >= m_store->count() || !m_store->run(storeId).inspection) return false;
  bool found = false;
  for (const engine::LayerInspection& li : m_store->run(storeId).inspection->layers)
    found = found || (QString::fromStdString(li.layer) == layer && !li.weight_block.empty());
  if (!found) return false;
  m_latestRun = storeId;
  m_updating = true;
  refreshLive();  // lists the runs (m_updating: loads nothing)
  m_runCombo->setCurrentIndex(m_runCombo->findData(storeId));
  m_updating = false;
  refreshLive();  // lists that run's layers
  m_updating = true;
  m_layerCombo->setCurrentIndex(m_layerCombo->findText(layer));
  m_tensorCombo->setCurrentIndex(gradient ? 1 : 0);
  m_updating = false;
  m_outlierChosen = false;
  if (m_source != Source::Live)
    setSource(Source::Live);
  else
    loadLive();
  return true;
}

void BlockView::refreshLive() {
  const bool outer = m_updating;
  m_updating = true;
  // Runs whose latest inspection has a block to show.
  const int keepRun = m_runCombo->currentIndex() >= 0 ? m_runCombo->currentData().toInt() : -1;
  m_runCombo->clear();
  if (m_store) {
    for (int id = 0; id < m_store->count(); ++id) {
      const RunData& r = m_store->run(id);
      if (!r.inspection) continue;
      bool any = false;
      for (const engine::LayerInspection& li : r.inspection->layers) any = any || !li.weight_block.empty();
      if (!any) continue;
      m_runCombo->addItem(tr("%1 (%2), step %3").arg(r.name, r.recipe).arg(r.inspection->step), id);
    }
  }
  int runIndex = m_runCombo->findData(keepRun);
  // A newer inspection of another run is not followed once one is picked;
  // the first one is.
  if (runIndex < 0) runIndex = m_runCombo->findData(m_latestRun);
  if (runIndex < 0) runIndex = m_runCombo->count() - 1;
  m_runCombo->setCurrentIndex(runIndex);

  const QString keepLayer = m_layerCombo->currentText();
  m_layerCombo->clear();
  if (runIndex >= 0) {
    const RunData& r = m_store->run(m_runCombo->currentData().toInt());
    for (const engine::LayerInspection& li : r.inspection->layers)
      if (!li.weight_block.empty()) m_layerCombo->addItem(QString::fromStdString(li.layer));
  }
  const int layerIndex = m_layerCombo->findText(keepLayer);
  m_layerCombo->setCurrentIndex(layerIndex >= 0 ? layerIndex : 0);
  m_runCombo->setEnabled(m_runCombo->count() > 0);
  m_layerCombo->setEnabled(m_layerCombo->count() > 0);
  m_tensorCombo->setEnabled(m_layerCombo->count() > 0);
  m_updating = outer;
  if (!outer && m_source == Source::Live) loadLive();
}

void BlockView::loadLive() {
  const engine::LayerInspection* li = nullptr;
  const RunData* run = nullptr;
  if (m_store && m_runCombo->currentIndex() >= 0) {
    run = &m_store->run(m_runCombo->currentData().toInt());
    for (const engine::LayerInspection& l : run->inspection->layers)
      if (QString::fromStdString(l.layer) == m_layerCombo->currentText() && !l.weight_block.empty()) li = &l;
  }
  if (!li) {
    m_liveText = tr("No live block yet. Press Step (F10, or Run ▸ Step): every run takes exactly one step and each "
                    "layer's weight and gradient blocks arrive here. With no run going, Step builds one from the "
                    "setup panel, paused, and takes its first step.");
    m_liveLabel->setText(m_liveText);
    setBase({}, 0.0);
    return;
  }
  const bool gradient = m_tensorCombo->currentIndex() == 1;
  const std::vector<float>& values = gradient ? li->grad_block : li->weight_block;
  const double amax = gradient ? li->grad_amax : li->weight_amax;
  const int needed = 2 * blockSize();
  QString shortNote;
  if (static_cast<int>(values.size()) < needed) {
    const int blocks = (static_cast<int>(values.size()) + blockSize() - 1) / blockSize();
    shortNote = tr(" The live block has %1 values: %2 %3 block%4 of %5 (a row of this layer, or the engine's "
                   "block, is that short).")
                    .arg(values.size())
                    .arg(blocks)
                    .arg(name(m_format))
                    .arg(blocks == 1 ? QString() : QStringLiteral("s"))
                    .arg(blockSize());
  }
  m_liveText = tr("%1 (%2), step %3 · layer %4, %5: %6 consecutive FP32 values along a row, around the weight's "
                  "largest |value|. The whole tensor's amax, %7, sets the per-tensor scale%8.%9")
                   .arg(run->name, run->recipe)
                   .arg(run->inspection->step)
                   .arg(QString::fromStdString(li->layer),
                        gradient ? tr("its weight gradient (unscaled, at the weight block's positions)") : tr("its weight"))
                   .arg(values.size())
                   .arg(QString::number(amax, 'g', 4),
                        engine::block_info(m_format).tensor_scale ? tr(" and NVFP4's S_enc") : QString(), shortNote);
  m_liveLabel->setText(m_liveText);
  setBase(values, amax);
}

void BlockView::setBase(const std::vector<float>& values, double tensorAmax) {
  m_base = values;
  m_tensorAmax = tensorAmax;
  if (!m_outlierChosen) pickOutlierDefault();
  recompute();
}

void BlockView::pickOutlierDefault() {
  // The largest |value| of block 1: the outlier grows what is already the
  // block's (and often the tensor's) amax.
  int best = 0;
  const int n = std::min<int>(blockSize(), static_cast<int>(m_base.size()));
  for (int i = 1; i < n; ++i)
    if (std::fabs(m_base[static_cast<std::size_t>(i)]) > std::fabs(m_base[static_cast<std::size_t>(best)])) best = i;
  m_outlier = best;
  m_updating = true;
  m_outlierSpin->setValue(best + 1);
  m_updating = false;
}

void BlockView::setOutlier(int element, double factor) {
  m_outlier = std::clamp(element, 0, blockSize() - 1);
  m_outlierChosen = true;
  m_factor = std::isfinite(factor) ? std::clamp(factor, 1.0, kMaxFactor) : 1.0;
  m_updating = true;
  m_outlierSpin->setValue(m_outlier + 1);
  m_slider->setValue(static_cast<int>(std::lround(std::log10(m_factor) * 100.0)));
  m_updating = false;
  recompute();
}

void BlockView::recompute() {
  std::vector<float> shown(m_base.begin(),
                           m_base.begin() + std::min<std::ptrdiff_t>(static_cast<std::ptrdiff_t>(m_base.size()),
                                                                     2 * blockSize()));
  if (m_outlier < static_cast<int>(shown.size()) && m_outlier < blockSize())
    shown[static_cast<std::size_t>(m_outlier)] =
        static_cast<float>(static_cast<double>(shown[static_cast<std::size_t>(m_outlier)]) * m_factor);
  m_cmp = compareBlocks(m_format, shown, m_source == Source::Live ? m_tensorAmax : 0.0);
  showComparison();
}

QString BlockView::scaleText(bool perTensor) const { return m_sideScale[perTensor ? 1 : 0]->text(); }
QString BlockView::summaryText(bool perTensor) const { return m_sideSummary[perTensor ? 1 : 0]->text(); }
QString BlockView::blockCaption(int block) const { return m_blocks[block].caption->text(); }
QString BlockView::outlierText() const { return m_outlierNote->text(); }
BlockStrip* BlockView::strip(int block, bool perTensor) const {
  return perTensor ? m_blocks[block].tensorStrip : m_blocks[block].blockStrip;
}

QString BlockView::sourceText() const {
  if (m_source == Source::Live) return m_liveText;
  return m_editNote->text();
}

void BlockView::showComparison() {
  const BlockComparison& c = m_cmp;
  const engine::BlockInfo& bi = engine::block_info(m_format);
  const int n = static_cast<int>(c.input.size());

  // Headings: what each side's scale is.
  m_sideTitle[0]->setText(tr("Block scaling: %1").arg(name(m_format)));
  m_sideTitle[1]->setText(tr("One per-tensor scale: %1").arg(name(c.element)));
  if (bi.tensor_scale)
    m_sideScale[0]->setText(tr("%1 × %2 per block, one %3 scale each, and one FP32 scale per tensor: "
                               "S_enc = 448 · 6 / amax = %4; value = element × block scale / S_enc")
                                .arg(bi.block)
                                .arg(name(c.element), name(c.scaleFormat), decimal(c.tensorScale)));
  else
    m_sideScale[0]->setText(tr("%1 × %2 per block, one %3 scale each: 2^(⌊log2 amax⌋ − %4), a power of two "
                               "that puts the block's largest value in %2's top binade")
                                .arg(bi.block)
                                .arg(name(c.element), name(c.scaleFormat))
                                .arg(bi.emax));
  m_sideScale[1]->setText(tr("scale = %1 / amax %2 = %3 (Transformer Engine's current scaling); value = "
                             "%4(x · scale, saturating) / scale")
                              .arg(QString::number(engine::format_info(c.element).max, 'g', 6),
                                   QString::number(c.amax, 'g', 4), QString::number(c.perTensorScale, 'g', 4),
                                   name(c.element)));
  if (m_source == Source::Typed) {
    const int needed = 2 * bi.block;
    const int typed = static_cast<int>(m_typed.size());
    m_editNote->setText(typed == needed  ? tr("%1 values: two blocks of %2").arg(typed).arg(bi.block)
                        : typed > needed ? tr("%1 values: the first %2 make the two blocks").arg(typed).arg(needed)
                                         : tr("%1 values: %2 needs %3 for two full blocks; a short block is a "
                                              "block of fewer values")
                                               .arg(typed)
                                               .arg(name(m_format))
                                               .arg(needed));
  }

  // Summaries, strips and tables.
  m_sideSummary[0]->setText(summaryLine(c.summary(false)));
  m_sideSummary[1]->setText(summaryLine(c.summary(true)));
  const int marked = m_outlier < std::min(n, bi.block) ? m_outlier : -1;
  for (int b = 0; b < 2; ++b) {
    BlockPanel& p = m_blocks[b];
    if (b < c.blocks()) {
      const SharedScale& s = c.scales[static_cast<std::size_t>(b)];
      p.blockStrip->setElements(c.input, c.block, s.first, s.count, bi.block, marked, c.element);
      p.tensorStrip->setElements(c.input, c.tensor, s.first, s.count, bi.block, marked, c.element);
      p.stripLabel->setText(tr("Block %1\nscale %2").arg(b + 1).arg(scaleValueText(c.scaleFormat, s.value)));
      p.caption->setText(tr("Block %1 · values %2–%3 · shared scale %4 = %5%6 · block side: %7 · per-tensor side: %8")
                             .arg(b + 1)
                             .arg(s.first + 1)
                             .arg(s.first + s.count)
                             .arg(QString::fromStdString(engine::hex_bits(c.scaleFormat, s.code)),
                                  scaleValueText(c.scaleFormat, s.value),
                                  bi.tensor_scale ? tr(" (%1), ÷ S_enc %2").arg(name(c.scaleFormat), decimal(c.tensorScale))
                                                  : QString(),
                                  shortSummary(c.summary(false, b)), shortSummary(c.summary(true, b))));
    } else {
      p.blockStrip->clear();
      p.tensorStrip->clear();
      p.stripLabel->setText(tr("Block %1").arg(b + 1));
      p.caption->setText(tr("Block %1 · no values").arg(b + 1));
    }
    fillTable(b);
  }
  m_factorLabel->setText(factorText(m_factor));
  if (marked < 0)
    m_outlierNote->setText(n == 0 ? QString() : tr("No element %1 in block 1").arg(m_outlier + 1));
  else if (m_base[static_cast<std::size_t>(marked)] == 0.0f)
    m_outlierNote->setText(tr("Element %1 is 0: the factor changes nothing; pick another").arg(marked + 1));
  else
    m_outlierNote->setText(tr("Outlier: element %1 = %2 %3 = %4")
                               .arg(marked + 1)
                               .arg(decimal(m_base[static_cast<std::size_t>(marked)]), factorText(m_factor),
                                    decimal(c.input[static_cast<std::size_t>(marked)])));
}

void BlockView::fillTable(int b) {
  const BlockComparison& c = m_cmp;
  QTableWidget* t = m_blocks[b].table;
  const int first = b < c.blocks() ? c.scales[static_cast<std::size_t>(b)].first : 0;
  const int rows = b < c.blocks() ? c.scales[static_cast<std::size_t>(b)].count : 0;
  if (t->rowCount() != rows) {
    t->setRowCount(rows);
    for (int r = 0; r < rows; ++r)
      for (int col = 0; col < ColumnCount; ++col)
        if (!t->item(r, col)) t->setItem(r, col, item(col != Index && col != BlockCode && col != TensorCode));
  }
  QFont mono = t->font();
  mono.setFamily(QStringLiteral("monospace"));
  mono.setStyleHint(QFont::Monospace);
  for (int r = 0; r < rows; ++r) {
    const std::size_t k = static_cast<std::size_t>(first + r);
    const bool outlier = static_cast<int>(k) == m_outlier && b == 0 && m_factor != 1.0;
    QTableWidgetItem* index = t->item(r, Index);
    index->setText(outlier ? QStringLiteral("%1 ◆").arg(k + 1) : QString::number(k + 1));
    QFont f = t->font();
    f.setBold(outlier);
    index->setFont(f);
    QTableWidgetItem* input = t->item(r, Input);
    input->setText(decimal(c.input[k]));
    input->setFont(f);
    for (int side = 0; side < 2; ++side) {
      const QuantizedElement& e = side == 0 ? c.block[k] : c.tensor[k];
      const int base = side == 0 ? BlockCode : TensorCode;
      QTableWidgetItem* code = t->item(r, base);
      code->setText(QString::fromStdString(engine::binary_fields(c.element, e.code)));
      code->setToolTip(QString::fromStdString(engine::hex_bits(c.element, e.code)));
      code->setFont(mono);
      QTableWidgetItem* value = t->item(r, base + 1);
      value->setText(decimal(e.value));
      QTableWidgetItem* error = t->item(r, base + 2);
      QFont ef = t->font();
      ef.setBold(e.flushed);
      error->setFont(ef);
      error->setText(e.flushed                    ? tr("flushed to 0")
                     : std::isnan(e.relError)     ? QStringLiteral("—")
                     : c.input[k] == 0.0f         ? QStringLiteral("0")
                                                  : number_text::percent(e.relError));
      error->setToolTip(std::isfinite(e.value) && std::isfinite(c.input[k])
                            ? tr("absolute error %1")
                                  .arg(number_text::significant(std::fabs(static_cast<double>(e.value) - c.input[k]), 3))
                            : QString());
      const QColor colour = BlockStrip::colourFor(c.input[k], e);
      error->setBackground(colour.lighter(e.flushed ? 160 : 135));
      error->setForeground(e.flushed ? chart_style::kFlagText : chart_style::kBitInk);
      value->setForeground(e.flushed ? chart_style::kFlagText : chart_style::kBitInk);
    }
  }
}
