// SolverView: the Solver tab's controls, chart and summary (see solver_view.h).
#include "solver/solver_view.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFormLayout>
#include <QGridLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QScopedValueRollback>
#include <QScrollArea>
#include <QSlider>
#include <QSpinBox>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

#include "charts/chart_style.h"
#include "solver/solver_chart.h"

namespace {

// The largest n offered: a run cannot be interrupted (Stop and closing the
// window wait for the one in progress), and at n = 2048 making the matrix
// alone is about 60 GFLOP. The engine takes more (kMaxSolveN): the CLI.
constexpr int kMaxN = 2048;

QString errorText(double v) { return std::isnan(v) ? QStringLiteral("–") : QString::number(v, 'e', 3); }

}  // namespace

double SolverView::condForSlider(int position) {
  return std::pow(10.0, static_cast<double>(position) / kSliderStepsPerDecade);
}

int SolverView::sliderForCond(double cond) {
  const int p = static_cast<int>(std::lround(std::log10(std::max(cond, 1.0)) * kSliderStepsPerDecade));
  return std::clamp(p, 0, kMaxDecades * kSliderStepsPerDecade);
}

SolverView::SolverView(QWidget* parent) : QWidget(parent) {
  setObjectName(QStringLiteral("solverView"));
  m_runner = new SolverRunner(this);

  // The settings: a narrow column, scrollable on a short screen.
  auto* settings = new QWidget;
  auto* form = new QFormLayout(settings);
  form->setContentsMargins(4, 4, 4, 4);
  m_n = new QSpinBox;
  m_n->setObjectName(QStringLiteral("solverN"));
  m_n->setRange(2, kMaxN);
  m_n->setValue(256);
  m_n->setToolTip(tr("The matrix size n: a random n x n matrix, b = A x for a random x (so the forward error is known)"));
  form->addRow(tr("Size n"), m_n);
  m_cond = new QSlider(Qt::Horizontal);
  m_cond->setObjectName(QStringLiteral("solverCond"));
  m_cond->setRange(0, kMaxDecades * kSliderStepsPerDecade);
  m_cond->setPageStep(kSliderStepsPerDecade);
  m_cond->setTickInterval(kSliderStepsPerDecade);
  m_cond->setTickPosition(QSlider::TicksBelow);
  m_cond->setValue(sliderForCond(1e4));
  m_cond->setToolTip(tr("The 2-norm condition number κ(A), 10^0 to 10^12 (singular values 1 .. 1/κ, geometric)"));
  m_condLabel = new QLabel;
  m_condLabel->setObjectName(QStringLiteral("solverCondLabel"));
  m_condLabel->setMinimumWidth(m_condLabel->fontMetrics().horizontalAdvance(QStringLiteral("κ = 1e+12 ")));
  auto* condRow = new QHBoxLayout;
  condRow->addWidget(m_cond, 1);
  condRow->addWidget(m_condLabel);
  form->addRow(tr("κ(A)"), condRow);
  m_seed = new QSpinBox;
  m_seed->setObjectName(QStringLiteral("solverSeed"));
  m_seed->setRange(0, 1000000);
  form->addRow(tr("Seed"), m_seed);

  auto* formats = new QGroupBox(tr("Factorization formats"));
  auto* grid = new QGridLayout(formats);
  grid->setContentsMargins(4, 4, 4, 4);
  const std::pair<engine::SolveFormat, bool> offered[] = {
      {engine::SolveFormat::f64(), false},
      {engine::SolveFormat::of(engine::Format::FP32), true},
      {engine::SolveFormat::of(engine::Format::TF32), false},
      {engine::SolveFormat::of(engine::Format::BF16), true},
      {engine::SolveFormat::of(engine::Format::FP16), true},
      {engine::SolveFormat::of(engine::Format::E4M3), false},
  };
  int i = 0;
  for (const auto& [f, on] : offered) {
    // The CLI's names; E4M3 as the issue and the lessons write it.
    auto* box = new QCheckBox(!f.fp64 && f.format == engine::Format::E4M3 ? QStringLiteral("fp8-e4m3")
                                                                          : SolverChart::formatLabel(f));
    box->setObjectName(QStringLiteral("solverFormat_") + SolverChart::formatLabel(f));
    box->setChecked(on);
    grid->addWidget(box, i / 3, i % 3);
    m_formats.emplace_back(f, box);
    ++i;
  }
  m_tensorCore = new QCheckBox(tr("Tensor Core mode"));
  m_tensorCore->setObjectName(QStringLiteral("solverTensorCore"));
  m_tensorCore->setToolTip(tr("The LU held in FP32 and only the trailing update's operands rounded to the format "
                              "(FP16-TC, as Haidar, Tomov, Dongarra and Higham); off: every value of the LU is a "
                              "value of the format"));
  grid->addWidget(m_tensorCore, 2, 0, 1, 3);
  form->addRow(formats);

  m_method = new QComboBox;
  m_method->setObjectName(QStringLiteral("solverMethod"));
  m_method->addItem(tr("LU-IR"));
  m_method->addItem(tr("GMRES-IR"));
  m_method->addItem(tr("Both"));
  m_method->setCurrentIndex(2);
  m_method->setToolTip(tr("LU-IR: each update solved with the LU; GMRES-IR: by GMRES preconditioned with it, "
                          "which converges for κ well beyond 1/u"));
  form->addRow(tr("Method"), m_method);
  m_residual = new QComboBox;
  m_residual->setObjectName(QStringLiteral("solverResidual"));
  m_residual->addItems({QStringLiteral("fp32"), QStringLiteral("fp64"), QStringLiteral("fp80")});
  m_residual->setCurrentIndex(1);
  m_residual->setToolTip(tr("The precision of the residual r = b - A x (fp80: x87 extended)"));
  form->addRow(tr("Residual"), m_residual);
  m_gmres = new QComboBox;
  m_gmres->setObjectName(QStringLiteral("solverGmres"));
  m_gmres->addItems({QStringLiteral("fp64"), QStringLiteral("fp32")});
  m_gmres->setToolTip(tr("GMRES-IR's inner solve: fp64, or fp32 (five-precision GMRES-IR: A and the substitutions in "
                         "FP32, half the bytes a step, more outer steps)"));
  form->addRow(tr("GMRES inner"), m_gmres);
  m_maxIter = new QSpinBox;
  m_maxIter->setObjectName(QStringLiteral("solverMaxIter"));
  m_maxIter->setRange(0, 1000);
  m_maxIter->setValue(30);
  form->addRow(tr("Max iterations"), m_maxIter);

  m_solve = new QPushButton(tr("Solve"));
  m_solve->setObjectName(QStringLiteral("solverSolve"));
  m_solve->setDefault(true);
  m_stop = new QPushButton(tr("Stop"));
  m_stop->setObjectName(QStringLiteral("solverStop"));
  m_stop->setToolTip(tr("Stop after the run in progress"));
  auto* buttons = new QHBoxLayout;
  buttons->addWidget(m_solve);
  buttons->addWidget(m_stop);
  form->addRow(buttons);
  m_status = new QLabel;
  m_status->setObjectName(QStringLiteral("solverStatus"));
  m_status->setWordWrap(true);
  form->addRow(m_status);

  auto* settingsScroll = new QScrollArea;
  settingsScroll->setWidget(settings);
  settingsScroll->setWidgetResizable(true);
  settingsScroll->setFrameShape(QFrame::NoFrame);
  settingsScroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  settingsScroll->setMinimumWidth(settings->sizeHint().width() + 16);
  settingsScroll->setMaximumWidth(settings->sizeHint().width() + 40);

  m_chart = new SolverChart;
  m_table = new QTableWidget(0, ColumnCount);
  m_table->setObjectName(QStringLiteral("solverSummary"));
  m_table->setHorizontalHeaderLabels({tr("run"), tr("converged"), tr("iterations"), tr("GMRES steps"),
                                      tr("backward error"), tr("forward error"), tr("scale"), tr("time (s)"),
                                      tr("why it stopped")});
  m_table->horizontalHeaderItem(Scale)->setToolTip(
      tr("The power of two the matrix was multiplied by before an fp16 or fp8 factorization (so it does not overflow)"));
  m_table->horizontalHeaderItem(Seconds)->setToolTip(tr("Factorization and refinement, wall clock"));
  m_table->verticalHeader()->hide();
  m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  m_table->horizontalHeader()->setStretchLastSection(true);
  m_table->verticalHeader()->setDefaultSectionSize(m_table->fontMetrics().height() + 6);
  m_table->setMinimumHeight(80);

  auto* right = new QSplitter(Qt::Vertical);
  right->setObjectName(QStringLiteral("solverSplitter"));
  right->addWidget(m_chart);
  right->addWidget(m_table);
  right->setStretchFactor(0, 2);
  right->setStretchFactor(1, 1);
  // Two thirds to the chart, a third to the table from the start (not the
  // size hints' share, which left the table two rows at 1280x720).
  right->setSizes({2000, 1000});
  right->setChildrenCollapsible(false);

  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(settingsScroll);
  layout->addWidget(right, 1);

  connect(m_cond, &QSlider::valueChanged, this, &SolverView::updateCondLabel);
  // A control changed by hand: the controls' job again, not the lesson's.
  auto byHand = [this] {
    if (!m_settingJob) clearLessonJob();
  };
  connect(m_n, &QSpinBox::valueChanged, this, byHand);
  connect(m_cond, &QSlider::valueChanged, this, byHand);
  connect(m_seed, &QSpinBox::valueChanged, this, byHand);
  for (const auto& f : m_formats) connect(f.second, &QCheckBox::toggled, this, byHand);
  connect(m_tensorCore, &QCheckBox::toggled, this, byHand);
  connect(m_method, &QComboBox::currentIndexChanged, this, byHand);
  connect(m_residual, &QComboBox::currentIndexChanged, this, byHand);
  connect(m_gmres, &QComboBox::currentIndexChanged, this, byHand);
  connect(m_maxIter, &QSpinBox::valueChanged, this, byHand);
  connect(m_solve, &QPushButton::clicked, this, [this] { solve(); });
  connect(m_stop, &QPushButton::clicked, this, &SolverView::stop);
  connect(m_runner, &SolverRunner::matrixReady, this, [this](double seconds) {
    m_status->setText(seconds > 0 ? tr("Matrix made in %1 s; solving…").arg(seconds, 0, 'f', 2)
                                  : tr("Solving (the matrix of the last solve)…"));
  });
  connect(m_runner, &SolverRunner::outcome, this, &SolverView::onOutcome);
  connect(m_runner, &SolverRunner::finished, this, &SolverView::onFinished);
  updateCondLabel();
  updateButtons();
  m_status->setText(tr("Choose the formats and press Solve."));
}

void SolverView::updateCondLabel() {
  m_condLabel->setText(QStringLiteral("κ = %1").arg(QString::number(condForSlider(m_cond->value()), 'g', 3)));
}

void SolverView::updateButtons() {
  const bool busy = m_runner->running();
  m_solve->setEnabled(!busy);
  m_stop->setEnabled(busy);
}

SolverJob SolverView::job() const {
  if (m_lessonSet) return m_lesson;
  SolverJob j;
  j.n = m_n->value();
  j.cond = condForSlider(m_cond->value());
  j.seed = static_cast<std::uint64_t>(m_seed->value());
  for (const auto& [f, box] : m_formats)
    if (box->isChecked()) j.formats.push_back(f);
  const int m = m_method->currentIndex();
  if (m == 0 || m == 2) j.methods.push_back(engine::Method::LuIr);
  if (m == 1 || m == 2) j.methods.push_back(engine::Method::GmresIr);
  j.tensorCore = m_tensorCore->isChecked();
  const QString r = m_residual->currentText();
  j.residual = r == QLatin1String("fp32") ? engine::Arith::FP32
               : r == QLatin1String("fp80") ? engine::Arith::FP80
                                            : engine::Arith::FP64;
  j.maxIter = m_maxIter->value();
  j.gmres = m_gmres->currentText() == QLatin1String("fp32") ? engine::Arith::FP32 : engine::Arith::FP64;
  return j;
}

void SolverView::setLessonJob(const SolverJob& lesson) {
  // The controls show the lesson's system and what its runs use.
  SolverJob shown = lesson;
  shown.formats.clear();
  shown.methods.clear();
  shown.tensorCore = false;
  for (const engine::SolveRun& r : lesson.runs) {
    const engine::RefineConfig& c = r.config;
    if (std::find(shown.formats.begin(), shown.formats.end(), c.lu.factor) == shown.formats.end())
      shown.formats.push_back(c.lu.factor);
    if (std::find(shown.methods.begin(), shown.methods.end(), c.method) == shown.methods.end())
      shown.methods.push_back(c.method);
    shown.tensorCore = shown.tensorCore || (!c.lu.factor.fp64 && c.lu.storage == engine::LuConfig::Storage::FP32);
  }
  if (!lesson.runs.empty()) {
    shown.residual = lesson.runs.front().config.residual;
    shown.maxIter = lesson.runs.front().config.max_iter;
    shown.gmres = lesson.runs.front().config.gmres;
  }
  setJob(shown);
  m_lesson = lesson;
  m_lessonSet = true;
  QStringList names;
  for (const engine::SolveRun& r : lesson.runs) names << QString::fromStdString(r.name);
  m_status->setText(tr("The lesson's runs: %1. Solve (F5) runs them.").arg(names.join(QStringLiteral(", "))));
}

void SolverView::clearLessonJob() {
  if (!m_lessonSet) return;
  m_lessonSet = false;
  m_lesson = SolverJob();
  m_status->setText(tr("Your own settings now, not the lesson's."));
}

void SolverView::setJob(const SolverJob& j) {
  const QScopedValueRollback<bool> guard(m_settingJob, true);
  m_n->setValue(static_cast<int>(j.n));
  m_cond->setValue(sliderForCond(j.cond));
  m_seed->setValue(static_cast<int>(j.seed));
  for (const auto& [f, box] : m_formats) {
    bool on = false;
    for (const auto& g : j.formats) on = on || g == f;
    box->setChecked(on);
  }
  bool lu = false, gmres = false;
  for (engine::Method m : j.methods) (m == engine::Method::LuIr ? lu : gmres) = true;
  m_method->setCurrentIndex(lu && gmres ? 2 : (gmres ? 1 : 0));
  m_tensorCore->setChecked(j.tensorCore);
  m_residual->setCurrentText(QString::fromLatin1(engine::arith_key(j.residual)));
  m_maxIter->setValue(j.maxIter);
  m_gmres->setCurrentText(QString::fromLatin1(engine::arith_key(j.gmres)));
}

bool SolverView::running() const { return m_runner->running(); }

QString SolverView::statusText() const { return m_status->text(); }

bool SolverView::solve() {
  if (m_runner->running()) return false;
  const SolverJob j = job();
  if (j.runs.empty() && j.formats.empty()) {
    m_status->setText(tr("Tick at least one factorization format."));
    return false;
  }
  const std::vector<engine::RefineConfig> configs = runConfigs(j);
  for (std::size_t i = 0; i < configs.size(); ++i) {
    const std::string problem = engine::refine_config_problem(configs[i]);
    if (!problem.empty()) {
      m_status->setText(tr("%1: %2").arg(runName(j, static_cast<int>(i)), QString::fromStdString(problem)));
      return false;
    }
  }
  m_last = j;
  m_ranLesson = m_lessonSet;
  m_outcomes.clear();
  m_expected = static_cast<int>(configs.size());
  m_table->setRowCount(0);
  m_chart->reset(j.cond, configs);
  m_clock.start();
  m_runner->start(j);
  m_status->setText(tr("Making the %1 x %1 matrix, κ = %2…").arg(j.n).arg(QString::number(j.cond, 'g', 3)));
  updateButtons();
  return true;
}

void SolverView::stop() {
  if (!m_runner->running()) return;
  m_runner->stop();
  m_status->setText(tr("Stopping after the run in progress…"));
}

void SolverView::onOutcome(const SolverOutcome& o) {
  m_outcomes.push_back(o);
  const QString name = runName(m_last, o.index);
  m_chart->addRun(name, o.config, o.result);
  const engine::SolveResult& r = o.result;
  const int row = m_table->rowCount();
  m_table->insertRow(row);
  auto set = [&](int column, const QString& text, Qt::Alignment align = Qt::AlignRight | Qt::AlignVCenter) {
    auto* item = new QTableWidgetItem(text);
    item->setTextAlignment(align);
    m_table->setItem(row, column, item);
    return item;
  };
  set(Run, name, Qt::AlignLeft | Qt::AlignVCenter)->setForeground(SolverChart::formatColour(o.config.lu.factor));
  QTableWidgetItem* conv = set(Converged, r.converged ? tr("yes") : tr("no"), Qt::AlignCenter);
  if (!r.converged) {
    conv->setBackground(chart_style::kFlagFill);
    conv->setForeground(chart_style::kFlagText);
  }
  set(Iterations, QString::number(r.iterations));
  set(Gmres, o.config.method == engine::Method::GmresIr ? QString::number(r.gmres_iterations) : QStringLiteral("–"));
  set(Backward, errorText(r.backward_error));
  set(Forward, errorText(r.forward_error));
  set(Scale, QString::number(r.scale, 'g', 9));
  set(Seconds, QString::number(r.factor_seconds + r.refine_seconds, 'g', 3));  // 0.00123, not 0.001
  set(Reason, QString::fromStdString(r.reason), Qt::AlignLeft | Qt::AlignVCenter)
      ->setToolTip(QString::fromStdString(r.reason));
  m_table->resizeColumnsToContents();
  m_status->setText(tr("%1 of %2 runs done…").arg(m_outcomes.size()).arg(m_expected));
}

void SolverView::onFinished(bool stopped, const QString& error) {
  const double seconds = m_clock.elapsed() / 1000.0;
  if (!error.isEmpty())
    m_status->setText(tr("The solve failed: %1").arg(error));
  else if (stopped)
    m_status->setText(tr("Stopped: %1 of %2 runs done.").arg(m_outcomes.size()).arg(m_expected));
  else
    m_status->setText(tr("%1 runs done in %2 s.").arg(m_outcomes.size()).arg(seconds, 0, 'f', 1));
  updateButtons();
  emit solveFinished();
}

void SolverView::setPresentation(bool on) { m_chart->setPresentation(on); }
