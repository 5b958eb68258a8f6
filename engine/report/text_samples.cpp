// samples.jsonl lines (report/text_samples.h).
#include "report/text_samples.h"

#include <nlohmann/json.hpp>

namespace engine {

std::string text_sample_line(const TextSample& t, const std::string& run) {
  using nlohmann::json;
  const json line = {{"run_id", t.run_id}, {"run", run}, {"step", t.step}, {"prompt", t.prompt}, {"text", t.text}};
  return line.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace engine
