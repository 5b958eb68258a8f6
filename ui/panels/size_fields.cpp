// SizeFields: the size choice over train/model_defaults.h's sizes and the model's shape fields.
#include "panels/size_fields.h"

#include <QComboBox>
#include <QFormLayout>
#include <QLineEdit>
#include <QRegularExpressionValidator>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QStandardItemModel>

#include <algorithm>

#include "train/model_defaults.h"

namespace {

constexpr int kCustomItem = 2;

QString join(const std::vector<std::int64_t>& v) {
  QStringList parts;
  for (std::int64_t x : v) parts << QString::number(x);
  return parts.join(QLatin1Char(','));
}

// The whole numbers of "256,128", or false when the text is not such a list.
bool split(const QString& text, std::vector<std::int64_t>& out) {
  out.clear();
  for (const QString& part : text.split(QLatin1Char(','))) {
    bool ok = false;
    const qlonglong x = part.trimmed().toLongLong(&ok);
    if (!ok || x < 1) return false;
    out.push_back(x);
  }
  return !out.empty();
}

}  // namespace

SizeFields::SizeFields(QWidget* parent) : QGroupBox(tr("Model size"), parent) {
  setObjectName(QStringLiteral("sizeFields"));
  m_form = new QFormLayout(this);
  m_form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  m_form->setLabelAlignment(Qt::AlignLeft | Qt::AlignVCenter);
  m_size = new QComboBox(this);
  m_size->setObjectName(QStringLiteral("sizeCombo"));
  m_size->addItem(tr("default"), QStringLiteral("default"));
  m_size->addItem(tr("GPU"), QStringLiteral("gpu"));
  m_size->addItem(tr("custom"), QStringLiteral("custom"));
  m_size->setItemData(0, tr("The bundled shapes: seconds a run on a CPU"), Qt::ToolTipRole);
  m_size->setItemData(1, tr("Shapes whose GEMMs keep a GPU's Tensor Cores busy, and a batch to match: "
                            "where mixed precision pays (minutes a step on a CPU)"),
                      Qt::ToolTipRole);
  m_size->setItemData(kCustomItem, tr("The shape below is neither size"), Qt::ToolTipRole);
  if (auto* items = qobject_cast<QStandardItemModel*>(m_size->model()))
    items->item(kCustomItem)->setFlags(items->item(kCustomItem)->flags() & ~Qt::ItemIsEnabled);
  m_form->addRow(tr("Size"), m_size);
  connect(m_size, &QComboBox::activated, this, [this](int index) {
    if (index != kCustomItem) emit sizeChosen(m_size->itemData(index).toString());
  });

  auto* list = new QRegularExpressionValidator(QRegularExpression(QStringLiteral("[0-9]+(,[0-9]+)*")), this);
  auto line = [&](const char* name, const QString& label, const QString& tip) {
    auto* e = new QLineEdit(this);
    e->setObjectName(QString::fromLatin1(name));
    e->setValidator(list);
    e->setToolTip(tip);
    m_form->addRow(label, e);
    connect(e, &QLineEdit::textChanged, this, &SizeFields::changed);
    return e;
  };
  m_widths = line("mlpWidthsEdit", tr("Widths"), tr("The mlp's hidden widths, comma-separated (256,128)"));
  m_channels = line("cnnChannelsEdit", tr("Channels"),
                    tr("The cnn's output channels per conv stage (5x5 conv, ReLU, 2x2 max-pool), comma-separated"));
  auto spin = [&](const char* name, int lo, int hi, const QString& label, const QString& tip) {
    auto* s = new QSpinBox(this);
    s->setObjectName(QString::fromLatin1(name));
    s->setRange(lo, hi);
    s->setToolTip(tip);
    m_form->addRow(label, s);
    connect(s, &QSpinBox::valueChanged, this, &SizeFields::changed);
    return s;
  };
  m_depth = spin("vitDepthSpin", 1, 64, tr("Depth"), tr("Transformer blocks"));
  m_width = spin("vitWidthSpin", 8, 8192, tr("Width"), tr("Channels (a multiple of the heads)"));
  m_heads = spin("vitHeadsSpin", 1, 64, tr("Heads"), tr("Attention heads"));
  engine::RunConfig defaults;
  show(defaults);
  setModel(QStringLiteral("mlp"));
}

void SizeFields::setModel(const QString& model) {
  const bool vit = model == QLatin1String("transformer");
  m_form->setRowVisible(m_widths, model == QLatin1String("mlp"));
  m_form->setRowVisible(m_channels, model == QLatin1String("cnn"));
  for (QSpinBox* s : {m_depth, m_width, m_heads}) m_form->setRowVisible(s, vit);
}

void SizeFields::apply(engine::RunConfig& c) const {
  if (c.model == "mlp") {
    std::vector<std::int64_t> w;
    if (split(m_widths->text(), w)) c.widths = w == engine::default_shape("mlp").widths ? std::vector<std::int64_t>{} : w;
  } else if (c.model == "cnn") {
    std::vector<std::int64_t> ch;
    if (split(m_channels->text(), ch))
      c.channels = ch == engine::default_shape("cnn").channels ? std::vector<std::int64_t>{} : ch;
  } else if (c.model == "transformer") {
    const auto value = [](const QSpinBox* s, std::int64_t dflt) {
      return s->value() == dflt ? std::nullopt : std::optional<std::int64_t>(s->value());
    };
    c.depth = value(m_depth, engine::kTransformerDepth);
    c.width = value(m_width, engine::kTransformerWidth);
    c.heads = value(m_heads, engine::kTransformerHeads);
  }
}

void SizeFields::show(const engine::RunConfig& c) {
  const auto shape_of = [&c](const char* model) {
    if (c.model != model) return engine::default_shape(model);
    return engine::model_shape(c);
  };
  const auto set = [](QSpinBox* s, std::int64_t v) {
    s->setValue(static_cast<int>(std::clamp<std::int64_t>(v, s->minimum(), s->maximum())));
  };
  m_widths->setText(join(shape_of("mlp").widths));
  m_channels->setText(join(shape_of("cnn").channels));
  const engine::ModelShape vit = shape_of("transformer");
  set(m_depth, vit.depth);
  set(m_width, vit.width);
  set(m_heads, vit.heads);
}

void SizeFields::showSize(const std::string& size) {
  const QSignalBlocker block(m_size);
  const int i = m_size->findData(QString::fromStdString(size.empty() ? std::string("custom") : size));
  m_size->setCurrentIndex(i >= 0 ? i : kCustomItem);
}

QString SizeFields::size() const { return m_size->currentData().toString(); }
