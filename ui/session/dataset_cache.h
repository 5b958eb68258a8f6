// DatasetCache: loads the selected IDX data set (Fashion-MNIST, a folder)
// in the background while the user sets up, so Start does not wait for it:
// decoding Fashion-MNIST's 60,000 gzipped images takes ~370 ms here, longer
// than the whole start-to-first-point budget (300 ms). The Trainer gets
// the loaded pair through Trainer::provide_data().
#pragma once

#include <QObject>
#include <QString>
#include <QTimer>

#include <future>
#include <memory>
#include <string>

namespace engine {
struct DatasetPair;
}

// GUI thread only (the load itself runs on a std::async thread).
class DatasetCache : public QObject {
  Q_OBJECT

 public:
  // Loads start this long after the last request, so stepping through the
  // dataset combo (or a test switching to spirals) loads nothing.
  static constexpr int kSettleMs = 250;

  explicit DatasetCache(QObject* parent = nullptr);
  ~DatasetCache() override;  // waits for a load in flight

  // Asks for `dataset` (a spec as load_dataset takes it). Generated sets
  // (spirals, tiny-gradients) load in milliseconds and are not cached, nor
  // are text sets (the trainer cuts their windows at each run's context).
  void request(const QString& dataset);
  // The loaded pair for `dataset`, or null (not requested, still loading,
  // or it failed: the run then loads it and reports the error itself).
  // IDX sets do not depend on the seed, so any run may use the pair.
  std::shared_ptr<const engine::DatasetPair> get(const std::string& dataset);
  bool loading() const;

 signals:
  void loaded(const QString& dataset);

 private:
  void startLoad();

  QTimer m_settle;
  QString m_wanted;
  std::string m_loadingName;
  std::future<std::shared_ptr<const engine::DatasetPair>> m_future;
  std::string m_name;
  std::shared_ptr<const engine::DatasetPair> m_data;
  QTimer m_poll;
};
