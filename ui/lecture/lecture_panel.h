// LecturePanel: beside the live charts, the chosen lesson — its title, its
// explanation (what to watch on which chart, and why), the runs Start
// launches, and once they end its claims with PASS or FAIL.
#pragma once

#include <QHash>
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

  // Large type for the room (chart_style::presentation), as large as lets
  // the whole lesson fit the panel without scrolling.
  void setPresentation(bool on);
  // The presentation type's scale (1: chart_style::presentation's sizes).
  double typeScale() const { return m_typeScale; }
  // How many type sizes have been laid out and measured so far (each costs
  // a text layout of the whole panel on the UI thread).
  int fitMeasurements() const { return m_fitMeasurements; }

 signals:
  void closeRequested();

 protected:
  void resizeEvent(QResizeEvent* event) override;

 private:
  void showClaims();
  void applyType(double scale);  // 0: the normal fonts
  void fitPresentation();

  engine::Preset m_preset;
  std::vector<engine::ClaimResult> m_results;
  QString m_note;
  QLabel* m_title = nullptr;
  QLabel* m_explanation = nullptr;
  QLabel* m_runs = nullptr;
  QLabel* m_claimsHeading = nullptr;
  QLabel* m_claims = nullptr;
  QToolButton* m_close = nullptr;
  QWidget* m_content = nullptr;
  class QScrollArea* m_scroll = nullptr;
  bool m_presentation = false;
  double m_typeScale = 1.0;
  // What the type was last fitted to (fitPresentation).
  int m_fitWidth = -1;
  int m_fitMeasurements = 0;
  int m_fitHeight = -1;
  QString m_fitText;
  // The size each (panel size, text) was fitted to before: presentation view
  // toggled again, or the same lesson shown again, sets its type at once.
  QHash<QString, int> m_fitted;
};
