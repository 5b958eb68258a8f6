// FormatExplorer: the rows, their read-outs and the three ways to move the
// value (typing, dragging, stepping); every number from engine::inspect;
// the block view in its own tab.
#include "lecture/format_explorer.h"

#include <QButtonGroup>
#include <QCheckBox>
#include <QDialogButtonBox>
#include <QFrame>
#include <QGridLayout>
#include <QKeyEvent>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QPushButton>
#include <QRadioButton>
#include <QScreen>
#include <QScrollArea>
#include <QTabWidget>
#include <QVBoxLayout>

#include <charconv>
#include <cmath>
#include <limits>

#include "charts/chart_style.h"
#include "charts/number_text.h"
#include "lecture/bit_cells.h"
#include "lecture/block_view.h"
#include "lecture/number_line.h"

namespace {

// Indexing rows by the enum needs the tensor and element formats first.
static_assert(static_cast<int>(engine::Format::E3M2) == engine::kFormatCount &&
              static_cast<int>(engine::Format::E8M0) == FormatExplorer::kRowCount - 1);

// A neighbour on the wrong side (a gap that is not positive) is no
// neighbour: the value is the format's last in that direction.
bool isNeighbour(double neighbour, double gap) { return !std::isnan(neighbour) && gap > 0; }

QString gapPart(const QString& word, double neighbour, double gap) {
  if (!isNeighbour(neighbour, gap)) return QObject::tr("%1 none").arg(word);
  return QObject::tr("%1 %2 (gap %3)")
      .arg(word, QString::fromStdString(engine::shortest_decimal(static_cast<float>(neighbour))),
           number_text::significant(gap, 3));
}

}  // namespace

const std::array<engine::Format, FormatExplorer::kRowCount>& FormatExplorer::rowFormats() {
  static const std::array<engine::Format, kRowCount> rows = [] {
    std::array<engine::Format, kRowCount> r{};
    int i = 0;
    for (engine::Format f : engine::kAllFormats) r[static_cast<std::size_t>(i++)] = f;
    for (engine::Format f : engine::kElementFormats) r[static_cast<std::size_t>(i++)] = f;
    return r;
  }();
  return rows;
}

// Why a typed value is not shown: a decimal a double cannot hold (1e400)
// is out of range, not "not a number".
QString FormatExplorer::unparsedNote(const QString& text) {
  QString t = text.trimmed();
  t.remove(QLatin1Char(' '));
  const QByteArray s = t.toLatin1();
  double d = 0;
  const char* first = s.constData();
  if (!s.isEmpty() && (*first == '+' || *first == '-')) ++first;
  const auto [end, ec] = std::from_chars(first, s.constData() + s.size(), d);
  if (ec == std::errc::result_out_of_range && end == s.constData() + s.size())
    return t.contains(QLatin1String("e-"), Qt::CaseInsensitive) ? tr("out of range: below a double's smallest, 4.9e-324")
                                                                : tr("out of range: beyond a double's ±1.8e308");
  return tr("not a number");
}

FormatExplorer::FormatExplorer(QWidget* parent) : QDialog(parent) {
  setObjectName(QStringLiteral("formatExplorer"));
  setWindowTitle(tr("Format explorer"));
  m_edit = new QLineEdit(this);
  m_edit->setObjectName(QStringLiteral("explorerValue"));
  m_edit->setPlaceholderText(tr("a number: 0.1, 65504, 6e-8, 2^-24, inf, nan"));
  m_edit->setToolTip(tr("Type a value (decimal, 2^k, inf, nan); ↑/↓ step one ULP of the selected format"));
  m_edit->installEventFilter(this);
  m_parseNote = new QLabel(this);
  m_parseNote->setObjectName(QStringLiteral("explorerParseNote"));
  m_parseNote->setStyleSheet(QStringLiteral("color:%1").arg(chart_style::kAlarmLine.name()));
  m_saturateCheck = new QCheckBox(tr("Saturate FP8 (clamp to ±max instead of inf/NaN)"), this);
  m_saturateCheck->setToolTip(tr("FP8 casts saturate when a recipe asks for it; FP6, FP4 and E8M0 have no inf "
                                 "and always saturate"));
  m_saturateCheck->setObjectName(QStringLiteral("explorerSaturate"));
  m_saturateCheck->installEventFilter(this);
  connect(m_saturateCheck, &QCheckBox::toggled, this, &FormatExplorer::setSaturate);
  connect(m_edit, &QLineEdit::textEdited, this, [this](const QString& text) {
    const bool ok = setValueText(text);
    m_parseNote->setText(ok || text.trimmed().isEmpty() ? QString() : unparsedNote(text));
  });

  auto* head = new QHBoxLayout;
  head->addWidget(new QLabel(tr("Value"), this));
  head->addWidget(m_edit, 1);
  head->addWidget(m_parseNote);
  head->addSpacing(12);
  head->addWidget(m_saturateCheck);
  auto* hint = new QLabel(tr("Click a bit to flip it · drag along a number line · ↑/↓ (or ←/→) step one ULP of the "
                             "selected format · red: flushes to zero or overflows, amber: subnormal, green: normal"),
                          this);
  hint->setWordWrap(true);
  hint->setObjectName(QStringLiteral("explorerHint"));

  auto* grid = new QGridLayout;
  grid->setHorizontalSpacing(10);
  grid->setVerticalSpacing(2);
  auto* group = new QButtonGroup(this);
  int gridRow = 0;
  for (engine::Format f : rowFormats()) {
    if (f == engine::Format::E3M2) {
      auto* section = new QLabel(
          tr("<b>OCP Microscaling element formats</b> — the elements and the scale of MXFP8/6/4 and NVFP4 "
             "(the Blocks tab): no inf; FP6 and FP4 have no NaN and saturate at ±max; E8M0 is an unsigned "
             "power of two, 2^-127 to 2^127, 0xFF NaN"),
          this);
      section->setObjectName(QStringLiteral("explorerElementSection"));
      section->setWordWrap(true);
      grid->addWidget(section, gridRow++, 0, 1, 5);
    }
    Row& r = m_rows[index(f)];
    const QString key = QString::fromLatin1(engine::format_key(f));
    r.name = new QRadioButton(QString::fromLatin1(engine::format_name(f)), this);
    r.name->setObjectName(QStringLiteral("select-%1").arg(key));
    r.name->setToolTip(tr("The arrow keys step one ULP of this format"));
    QFont bold = r.name->font();
    bold.setBold(true);
    r.name->setFont(bold);
    r.name->installEventFilter(this);
    group->addButton(r.name);
    connect(r.name, &QRadioButton::toggled, this, [this, f](bool on) {
      if (on) m_selected = f;
    });
    r.bits = new BitCells(f, this);
    connect(r.bits, &BitCells::bitClicked, this, [this, f](int bit) { flipBit(f, bit); });
    r.hex = new QLabel(this);
    r.hex->setObjectName(QStringLiteral("hex-%1").arg(key));
    r.hex->setTextInteractionFlags(Qt::TextSelectableByMouse);
    r.hex->setMinimumWidth(fontMetrics().horizontalAdvance(QStringLiteral("0x00000000")) + 6);
    r.cls = new QLabel(this);
    r.cls->setObjectName(QStringLiteral("class-%1").arg(key));
    r.cls->setMinimumWidth(fontMetrics().horizontalAdvance(QStringLiteral("normal (saturated)")) + 6);
    r.exact = new QLineEdit(this);
    r.exact->setObjectName(QStringLiteral("exact-%1").arg(key));
    r.exact->setReadOnly(true);
    r.exact->setFrame(false);
    r.exact->setToolTip(tr("The exact decimal value stored (every digit)"));
    r.exact->installEventFilter(this);
    r.error = new QLabel(this);
    r.error->setObjectName(QStringLiteral("error-%1").arg(key));
    r.gaps = new QLabel(this);
    r.gaps->setObjectName(QStringLiteral("gaps-%1").arg(key));
    r.line = new NumberLine(f, this);
    connect(r.line, &NumberLine::magnitudeDragged, this, [this](double magnitude) {
      const float sign = std::signbit(m_input) ? -1.0f : 1.0f;
      setValue(sign * static_cast<float>(magnitude));
    });

    grid->addWidget(r.name, gridRow, 0);
    grid->addWidget(r.bits, gridRow, 1);
    grid->addWidget(r.hex, gridRow, 2);
    grid->addWidget(r.cls, gridRow, 3);
    grid->addWidget(r.line, gridRow, 4, 2, 1);
    grid->addWidget(r.exact, gridRow + 1, 1);
    grid->addWidget(r.error, gridRow + 1, 2, 1, 2);
    grid->addWidget(r.gaps, gridRow + 2, 1, 1, 4);
    gridRow += 3;
    if (f != engine::Format::E4M3 && f != rowFormats().back()) {
      auto* rule = new QFrame(this);
      rule->setFrameShape(QFrame::HLine);
      rule->setFrameShadow(QFrame::Sunken);
      grid->addWidget(rule, gridRow++, 0, 1, 5);
    }
  }
  grid->setColumnStretch(4, 1);
  m_rows[index(m_selected)].name->setChecked(true);

  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, this);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  buttons->button(QDialogButtonBox::Close)->setAutoDefault(false);

  // Values tab: the value field, then the rows, which scroll when the
  // window is shorter than ten formats (1280x720).
  auto* rowsWidget = new QWidget;
  auto* rowsLayout = new QVBoxLayout(rowsWidget);
  rowsLayout->setContentsMargins(0, 0, 4, 0);
  rowsLayout->addLayout(grid);
  rowsLayout->addStretch(1);
  auto* scroll = new QScrollArea(this);
  scroll->setObjectName(QStringLiteral("explorerRows"));
  scroll->setWidget(rowsWidget);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  auto* valuesPage = new QWidget(this);
  auto* valuesLayout = new QVBoxLayout(valuesPage);
  valuesLayout->addLayout(head);
  valuesLayout->addWidget(hint);
  valuesLayout->addWidget(scroll, 1);
  m_blockView = new BlockView(this);
  m_tabs = new QTabWidget(this);
  m_tabs->setObjectName(QStringLiteral("explorerTabs"));
  m_tabs->addTab(valuesPage, tr("Values: one number in every format"));
  // The block view scrolls on a short screen rather than squeeze its
  // wrapped descriptions to one cut line.
  auto* blocksPage = new QScrollArea(this);
  blocksPage->setObjectName(QStringLiteral("blocksScroll"));
  blocksPage->setWidget(m_blockView);
  blocksPage->setWidgetResizable(true);
  blocksPage->setFrameShape(QFrame::NoFrame);
  m_tabs->addTab(blocksPage, tr("Blocks: MXFP8, MXFP6, MXFP4, NVFP4"));
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(m_tabs, 1);
  layout->addWidget(buttons);
  setValueText(QStringLiteral("0.1"));
  m_edit->setText(QStringLiteral("0.1"));
}

bool FormatExplorer::setValueText(const QString& text) {
  QString t = text.trimmed().toLower();
  t.remove(QLatin1Char(' '));
  if (t.isEmpty()) return false;
  bool negative = false;
  QString body = t;
  if (body.startsWith(QLatin1Char('-')) || body.startsWith(QLatin1Char('+'))) {
    negative = body.startsWith(QLatin1Char('-'));
    body = body.mid(1);
  }
  double d = 0;
  bool ok = false;
  if (body == QLatin1String("inf") || body == QLatin1String("infinity")) {
    d = std::numeric_limits<double>::infinity();
    ok = true;
  } else if (body == QLatin1String("nan")) {
    d = std::numeric_limits<double>::quiet_NaN();
    ok = true;
  } else if (body.startsWith(QLatin1String("2^"))) {
    const double e = body.mid(2).toDouble(&ok);
    if (ok) d = std::exp2(e);
  } else if (!body.startsWith(QLatin1Char('-')) && !body.startsWith(QLatin1Char('+'))) {
    d = QLocale::c().toDouble(body, &ok);
  }
  if (!ok) return false;
  // Beyond FP32: a cast from double overflows to inf or underflows to 0,
  // as the CLI reads a value (IEEE conversion, round to nearest).
  setValue(static_cast<float>(negative ? -d : d));
  return true;
}

void FormatExplorer::setValue(float x) {
  m_input = x;
  m_pinned.reset();
  recompute();
  if (!m_edit->hasFocus()) m_edit->setText(QString::fromStdString(engine::shortest_decimal(x)));
}

void FormatExplorer::setBits(engine::Format f, std::uint32_t bits) {
  const engine::Inspection i = engine::inspect_bits(f, bits);
  m_pinned = std::make_pair(f, i.bits);
  m_input = static_cast<float>(i.value);
  recompute();
  m_edit->setText(QString::fromStdString(engine::shortest_decimal(m_input)));
}

void FormatExplorer::setRunStore(RunStore* store) { m_blockView->setRunStore(store); }

void FormatExplorer::showBlocks() { m_tabs->setCurrentIndex(1); }

void FormatExplorer::showValues() { m_tabs->setCurrentIndex(0); }

QSize FormatExplorer::sizeHint() const {
  // Every row without scrolling, where the screen has the room.
  QSize s(1240, 1000);
  if (const QScreen* sc = screen()) s = s.boundedTo(sc->availableGeometry().size());
  return s;
}

void FormatExplorer::flipBit(engine::Format f, int bit) {
  const engine::FormatInfo& fi = engine::format_info(f);
  if (bit < 0 || bit >= fi.bits) return;  // fi.bits: sign, exponent and mantissa (E8M0: no sign)
  // Field bit -> container bit: TF32's 19 bits are the top of its FP32
  // container (Inspection::field_bits is bits >> 13).
  const int shift = f == engine::Format::TF32 ? 13 : 0;
  setBits(f, inspection(f).bits ^ (std::uint32_t{1} << (bit + shift)));
}

bool FormatExplorer::stepUlp(int direction) {
  const engine::Format f = m_selected;
  const engine::Inspection& cur = inspection(f);
  const double target = direction > 0 ? cur.next : cur.prev;
  // None past max, or for a value that is not finite.
  if (!isNeighbour(target, direction > 0 ? cur.gap_up : cur.gap_down)) return false;
  // The neighbour is representable in f: inspect gives its exact bits.
  setBits(f, engine::inspect(f, static_cast<float>(target)).bits);
  return true;
}

void FormatExplorer::selectFormat(engine::Format f) { m_rows[index(f)].name->setChecked(true); }

void FormatExplorer::setSaturate(bool on) {
  m_saturate = on;
  if (m_saturateCheck->isChecked() != on) m_saturateCheck->setChecked(on);
  recompute();
}

void FormatExplorer::recompute() {
  for (engine::Format f : rowFormats()) {
    if (m_pinned && m_pinned->first == f)
      m_shown[index(f)] = engine::inspect_bits(f, m_pinned->second);
    else
      m_shown[index(f)] = engine::inspect(f, m_input, m_saturate);
    showRow(f);
  }
}

void FormatExplorer::showRow(engine::Format f) {
  Row& r = m_rows[index(f)];
  const engine::Inspection& i = m_shown[index(f)];
  r.bits->setFieldBits(i.field_bits);
  r.bits->setToolTip(QString::fromStdString(engine::binary_fields(f, i.field_bits)));
  r.hex->setText(QString::fromStdString(engine::hex_bits(f, i.bits)));
  const QString cls = QString::fromStdString(engine::class_text(i));
  r.cls->setText(cls);
  const bool alarm = i.cls == engine::ValueClass::NaN || i.cls == engine::ValueClass::Inf || i.underflowed ||
                     i.saturated;
  const bool caution = i.cls == engine::ValueClass::Subnormal;
  r.cls->setStyleSheet(alarm     ? QStringLiteral("color:%1;font-weight:bold").arg(chart_style::kAlarmLine.name())
                       : caution ? QStringLiteral("color:%1;font-weight:bold").arg(chart_style::kCautionLine.name())
                                 : QString());
  r.exact->setText(number_text::exactDecimal(i.value));
  r.exact->setCursorPosition(0);
  r.error->setText(std::isnan(i.abs_error)
                       ? tr("error —")
                       : tr("error %1 (relative %2)")
                             .arg(number_text::significant(i.abs_error, 3), number_text::significant(i.rel_error, 3)));
  r.gaps->setText(QStringLiteral("%1   ·   %2").arg(gapPart(tr("↓ previous"), i.prev, i.gap_down),
                                                    gapPart(tr("↑ next"), i.next, i.gap_up)));
  r.line->setValue(i.value, i.input);
}

QString FormatExplorer::bitsText(engine::Format f) const { return m_rows[index(f)].bits->text(); }
QString FormatExplorer::hexText(engine::Format f) const { return m_rows[index(f)].hex->text(); }
QString FormatExplorer::classText(engine::Format f) const { return m_rows[index(f)].cls->text(); }
QString FormatExplorer::valueText(engine::Format f) const { return m_rows[index(f)].exact->text(); }
QString FormatExplorer::errorText(engine::Format f) const { return m_rows[index(f)].error->text(); }
QString FormatExplorer::gapText(engine::Format f) const { return m_rows[index(f)].gaps->text(); }

void FormatExplorer::keyPressEvent(QKeyEvent* event) {
  if (m_tabs->currentIndex() != 0) {  // the arrows step ULPs on the Values tab only
    QDialog::keyPressEvent(event);
    return;
  }
  switch (event->key()) {
    case Qt::Key_Up:
    case Qt::Key_Right: stepUlp(+1); return;
    case Qt::Key_Down:
    case Qt::Key_Left: stepUlp(-1); return;
    default: QDialog::keyPressEvent(event);
  }
}

bool FormatExplorer::eventFilter(QObject* watched, QEvent* event) {
  if (event->type() == QEvent::KeyPress) {
    const int key = static_cast<QKeyEvent*>(event)->key();
    // In text fields ←/→ move the cursor; ↑/↓ always step.
    const bool text = qobject_cast<QLineEdit*>(watched) != nullptr;
    if (key == Qt::Key_Up || (!text && key == Qt::Key_Right)) {
      stepUlp(+1);
      return true;
    }
    if (key == Qt::Key_Down || (!text && key == Qt::Key_Left)) {
      stepUlp(-1);
      return true;
    }
  }
  return QDialog::eventFilter(watched, event);
}
