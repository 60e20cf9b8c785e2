// The captures section of a summary's JSON (summary::captures; capture.hpp).
#include <stdexcept>

#include "report/json/json_fields.hpp"

namespace steptrace::detail {
namespace {

constexpr std::size_t max_captures_read = 1000;  // capture_max is at most 100 a run: a file's bound, read back

std::string text_or_empty(const json_doc& j, const char* key) {
  return j.contains(key) && j.at(key).is_string() ? j.at(key).get<std::string>() : std::string();
}

}  // namespace

json_doc captures_json(const std::vector<capture_record>& captures) {
  json_doc out = json_doc::array();
  for (const capture_record& c : captures) {
    out.push_back({{"reason", c.reason},
                   {"first_step", c.first_step},
                   {"last_step", c.last_step},
                   {"steps", c.steps},
                   {"rank", c.rank},
                   {"label", c.label.empty() ? json_doc(nullptr) : json_doc(c.label)},
                   {"evidence", c.evidence},
                   {"advice", c.advice},
                   {"path", c.path},
                   {"cost_s", c.cost_s},
                   {"tool", c.tool}});
    if (c.retroactive) {
      out.back()["retroactive"] = true;
      out.back()["indices"] = c.indices;
      out.back()["tripped"] = c.tripped;
    }
  }
  return out;
}

std::vector<capture_record> captures_from(const json_doc& j) {
  if (!j.is_array() || j.size() > max_captures_read)
    throw std::invalid_argument("captures: expected a list of at most 1000");
  std::vector<capture_record> out;
  for (const json_doc& c : j) {
    capture_record r;
    r.reason = text_or_empty(c, "reason");
    r.first_step = count_at(c, "first_step");
    r.last_step = count_at(c, "last_step");
    r.steps = count_at(c, "steps");
    r.rank = static_cast<std::uint32_t>(count_at(c, "rank"));
    r.label = text_or_empty(c, "label");
    r.evidence = text_or_empty(c, "evidence");
    r.advice = text_or_empty(c, "advice");
    r.path = text_or_empty(c, "path");
    r.cost_s = number_at(c, "cost_s");
    r.tool = text_or_empty(c, "tool");
    r.retroactive = c.value("retroactive", false);
    if (r.retroactive && c.contains("indices")) {
      const json_doc& at = c.at("indices");
      if (!at.is_array() || at.size() > 1000)
        throw std::invalid_argument("captures: indices: expected a list of at most 1000");
      for (const json_doc& i : at) r.indices.push_back(i.get<std::uint64_t>());
    }
    if (r.retroactive) r.tripped = count_at(c, "tripped");
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace steptrace::detail
