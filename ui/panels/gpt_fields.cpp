// GptFields: spin boxes over RunConfig's gpt keys, the engine's defaults and ranges.
#include "panels/gpt_fields.h"

#include <QCheckBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QSpinBox>

#include <algorithm>

#include "train/model_defaults.h"

GptFields::GptFields(QWidget* parent) : QGroupBox(tr("Language model"), parent) {
  setObjectName(QStringLiteral("gptFields"));
  auto* form = new QFormLayout(this);
  form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  form->setLabelAlignment(Qt::AlignLeft | Qt::AlignVCenter);
  const engine::RunConfig plain;
  engine::RunConfig gpt;
  gpt.model = "gpt";
  const engine::ModelShape defaults = engine::model_shape(gpt);
  auto spin = [&](const char* name, int lo, int hi, std::int64_t value, const QString& label, const QString& tip) {
    auto* s = new QSpinBox(this);
    s->setObjectName(QString::fromLatin1(name));
    s->setRange(lo, hi);
    s->setValue(static_cast<int>(value));
    s->setToolTip(tip);
    form->addRow(label, s);
    connect(s, &QSpinBox::valueChanged, this, &GptFields::changed);
    return s;
  };
  m_layers = spin("gptLayersSpin", 1, 64, defaults.depth, tr("Layers"), tr("Transformer blocks"));
  m_width = spin("gptWidthSpin", 8, 4096, defaults.width, tr("Width"), tr("Channels (a multiple of the heads)"));
  m_heads = spin("gptHeadsSpin", 1, 64, defaults.heads, tr("Heads"), tr("Attention heads"));
  m_context = spin("gptContextSpin", 1, 4096, defaults.context, tr("Context"),
                   tr("Characters the model sees at once (a training window)"));
  m_qkNorm = new QCheckBox(tr("qk-norm"), this);
  m_qkNorm->setObjectName(QStringLiteral("gptQkNormCheck"));
  m_qkNorm->setToolTip(tr("LayerNorm on each head's queries and keys: keeps attention logits from growing"));
  m_qkNorm->setChecked(plain.qk_norm);
  form->addRow(QString(), m_qkNorm);
  connect(m_qkNorm, &QCheckBox::toggled, this, &GptFields::changed);
  m_zLoss = new QDoubleSpinBox(this);
  m_zLoss->setObjectName(QStringLiteral("gptZLossSpin"));
  m_zLoss->setDecimals(5);
  m_zLoss->setRange(0.0, 1.0);
  m_zLoss->setSingleStep(0.0001);
  m_zLoss->setValue(plain.z_loss);
  m_zLoss->setSpecialValueText(tr("off"));
  m_zLoss->setToolTip(tr("C of the auxiliary loss C · log²Z: keeps the output logits from drifting (1e-4 is usual)"));
  form->addRow(tr("z-loss"), m_zLoss);
  connect(m_zLoss, &QDoubleSpinBox::valueChanged, this, &GptFields::changed);
}

void GptFields::apply(engine::RunConfig& c) const {
  c.depth = m_layers->value();
  c.width = m_width->value();
  c.heads = m_heads->value();
  c.context = m_context->value();
  c.qk_norm = m_qkNorm->isChecked();
  c.z_loss = m_zLoss->value();
}

void GptFields::show(const engine::RunConfig& c) {
  auto set = [](QSpinBox* s, std::int64_t v) {
    s->setValue(static_cast<int>(std::clamp<std::int64_t>(v, s->minimum(), s->maximum())));
  };
  // A gpt's shape, or the gpt's defaults for another model's config.
  engine::RunConfig gpt = c;
  if (c.model != "gpt") gpt = engine::RunConfig{}, gpt.context = c.context;
  gpt.model = "gpt";
  const engine::ModelShape shape = engine::model_shape(gpt);
  set(m_layers, shape.depth);
  set(m_width, shape.width);
  set(m_heads, shape.heads);
  set(m_context, c.context);
  m_qkNorm->setChecked(c.qk_norm);
  m_zLoss->setValue(c.z_loss);
}
