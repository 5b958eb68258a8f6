// StatusReadouts: four fixed-width labels on the status bar.
#include "panels/status_readouts.h"

#include <QLabel>
#include <QLocale>
#include <QStatusBar>

#include <cmath>

#include "session/run_store.h"

StatusReadouts::StatusReadouts(QStatusBar* bar) : QObject(bar) {
  auto label = [bar](const QString& objectName, const QString& widest) {
    auto* l = new QLabel(bar);
    l->setObjectName(objectName);
    // Fixed width from the widest expected text: numbers updating with every
    // drain (~30 Hz) must not make the status bar jitter.
    l->setMinimumWidth(l->fontMetrics().horizontalAdvance(widest) + 12);
    l->setAlignment(Qt::AlignRight | Qt::AlignVCenter);
    bar->addPermanentWidget(l);
    return l;
  };
  m_step = label(QStringLiteral("statusStep"), tr("step 9,999,999 / 9,999,999"));
  m_rate = label(QStringLiteral("statusRate"), tr("999,999 samples/s"));
  m_scale = label(QStringLiteral("statusScale"), tr("loss scale 2^-24"));
  m_memory = label(QStringLiteral("statusMemory"), tr("memory 1023.9 MiB, peak 1023.9 MiB"));
  m_memory->setToolTip(tr("The focus run's memory at its last step, and the most any step used (the peak the "
                          "Compare table and the export report)"));
  m_tokens = label(QStringLiteral("statusTokens"), tr("val 99.999 bits/token, perplexity 9999.9"));
  m_tokens->setToolTip(tr("The focus run's last validation: its loss per token in bits, and its perplexity"));
  m_tokens->hide();
  set(-1, -1.0, -1.0, -1);
}

void StatusReadouts::set(qint64 step, double samplesPerSecond, double lossScale, qint64 memoryBytes,
                         qint64 peakBytes) {
  const QLocale locale;
  const QString none = QStringLiteral("—");
  m_step->setText(tr("step %1").arg(step < 0 ? none : locale.toString(step)));
  m_rate->setText(tr("%1 samples/s").arg(samplesPerSecond < 0 ? none : locale.toString(samplesPerSecond, 'f', 0)));
  // Loss scales are powers of two under GradScaler: show the exponent.
  QString scale = none;
  if (lossScale > 0) {
    const double e = std::log2(lossScale);
    scale = e == std::round(e) ? QStringLiteral("2^%1").arg(static_cast<int>(e)) : locale.toString(lossScale, 'g', 6);
  }
  m_scale->setText(tr("loss scale %1").arg(scale));
  // "now" and "peak" side by side: the last step's total alone read as the
  // run's peak, which the Compare table shows 0.2 MiB higher.
  m_memory->setText(peakBytes < 0 ? tr("memory %1").arg(memoryBytes < 0 ? none : locale.formattedDataSize(memoryBytes))
                                  : tr("memory %1, peak %2")
                                        .arg(memoryBytes < 0 ? none : locale.formattedDataSize(memoryBytes),
                                             locale.formattedDataSize(peakBytes)));
}

void StatusReadouts::showRun(const RunData* run) {
  const bool text = run && !run->evals.empty() && run->evals.back().per_token;
  m_tokens->setVisible(text);
  if (text) {
    const engine::EvalMetrics& e = run->evals.back();
    m_tokens->setText(tr("val %1 bits/token, perplexity %2")
                          .arg(QLocale().toString(e.val_bits_per_token(), 'f', 3),
                               QLocale().toString(e.val_perplexity(), 'f', 1)));
  }
  if (!run || run->steps.empty()) {
    set(-1, -1, -1, -1);
    return;
  }
  // Samples/s over the last 50 steps (one step's rate is noisy).
  double samples = 0, ms = 0;
  const std::size_t n = run->steps.size();
  for (std::size_t i = n > 50 ? n - 50 : 0; i < n; ++i) {
    samples += run->steps[i].samples_per_second * run->steps[i].wall_ms / 1000.0;
    ms += run->steps[i].wall_ms;
  }
  const engine::StepMetrics& last = run->steps.back();
  set(last.step, ms > 0 ? samples / (ms / 1000.0) : -1, last.loss_scale, last.mem.total(), run->peak_memory);
  if (run->totalSteps > 0)
    m_step->setText(tr("step %1 / %2").arg(QLocale().toString(static_cast<qint64>(last.step)),
                                           QLocale().toString(static_cast<qint64>(run->totalSteps))));
}
