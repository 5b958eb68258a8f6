// DatasetCache: one background load at a time, the latest request wins.
#include "session/dataset_cache.h"

#include <chrono>
#include <exception>

#include "data/dataset.h"
#include "data/text.h"

DatasetCache::DatasetCache(QObject* parent) : QObject(parent) {
  m_settle.setSingleShot(true);
  m_settle.setInterval(kSettleMs);
  connect(&m_settle, &QTimer::timeout, this, &DatasetCache::startLoad);
  // Polls the future (the loading thread never touches Qt objects).
  m_poll.setInterval(20);
  connect(&m_poll, &QTimer::timeout, this, [this] { get(m_loadingName); });
}

DatasetCache::~DatasetCache() {
  if (m_future.valid()) m_future.wait();
}

void DatasetCache::request(const QString& dataset) {
  // A text set's windows depend on the run's context, and the trainer
  // cuts them in well under a second: it loads them itself.
  if (dataset == QLatin1String("spirals") || dataset == QLatin1String("tiny-gradients") || dataset.isEmpty() ||
      engine::is_text_spec(dataset.toStdString())) {
    m_settle.stop();
    m_wanted.clear();
    return;
  }
  m_wanted = dataset;
  if (m_name == dataset.toStdString() && m_data) return;
  m_settle.start();
}

bool DatasetCache::loading() const { return m_future.valid(); }

void DatasetCache::startLoad() {
  if (m_wanted.isEmpty() || m_future.valid()) {
    if (m_future.valid()) m_settle.start();  // one load at a time: ask again later
    return;
  }
  const std::string name = m_wanted.toStdString();
  if (name == m_name && m_data) return;
  m_loadingName = name;
  m_future = std::async(std::launch::async, [name]() -> std::shared_ptr<const engine::DatasetPair> {
    try {
      return std::make_shared<const engine::DatasetPair>(engine::load_dataset(name, 0));
    } catch (const std::exception&) {
      return nullptr;  // the run reports the error with its own message
    }
  });
  m_poll.start();
}

std::shared_ptr<const engine::DatasetPair> DatasetCache::get(const std::string& dataset) {
  if (m_future.valid() && m_future.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
    std::shared_ptr<const engine::DatasetPair> data = m_future.get();
    m_poll.stop();
    if (data) {
      // The latest set only: a Fashion-MNIST pair is ~220 MB of floats.
      m_name = m_loadingName;
      m_data = std::move(data);
      emit loaded(QString::fromStdString(m_name));
    }
  }
  return dataset == m_name ? m_data : nullptr;
}
