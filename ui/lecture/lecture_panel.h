// LecturePanel: beside the live charts, the chosen lesson — its title, its
// explanation (what to watch on which chart, and why), the runs Start
// launches, and once they end its claims with PASS or FAIL.
#pragma once

#include <QWidget>

#include <vector>

#include "lecture/claims.h"
#include "lecture/preset.h"

class QLabel;
class QToolButton;

// GUI thread only.
class LecturePanel : public QWidget {
  Q_OBJECT

 public:
  explicit LecturePanel(QWidget* parent = nullptr);

  void setPreset(const engine::Preset& preset);
  // The claims, checked on the runs' output; `note` says what the check
  // saw ("stopped at step 120 of 1500: ...") or "".
  void setClaimResults(const std::vector<engine::ClaimResult>& results, const QString& note = QString());
  // Back to "checked when the runs end" (a new start).
  void resetClaims();
  const std::vector<engine::ClaimResult>& claimResults() const { return m_results; }

  QString title() const;
  QString explanation() const;
  QString claimsText() const;  // what the claims label shows, as plain text

  // Large type for the room (chart_style::presentation).
  void setPresentation(bool on);

 signals:
  void closeRequested();

 private:
  void showClaims();

  engine::Preset m_preset;
  std::vector<engine::ClaimResult> m_results;
  QString m_note;
  QLabel* m_title = nullptr;
  QLabel* m_explanation = nullptr;
  QLabel* m_runs = nullptr;
  QLabel* m_claimsHeading = nullptr;
  QLabel* m_claims = nullptr;
  QToolButton* m_close = nullptr;
};
