#include "report/json/json_fields.hpp"

#include <cmath>
#include <stdexcept>
#include <string>
#include <string_view>

#include "base/utf8.hpp"

namespace steptrace::detail {

std::string shown(const json_doc& v) {
  std::string text = v.dump(-1, ' ', false, json_doc::error_handler_t::replace);
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return text;
}

std::uint64_t count_at(const json_doc& j, const char* key) {
  const json_doc& v = j.at(key);
  if (!v.is_number_unsigned() || v.get<std::uint64_t>() > (std::uint64_t{1} << 53)) {
    throw std::invalid_argument(std::string("\"") + key + "\" must be a non-negative integer, not " + shown(v));
  }
  return v.get<std::uint64_t>();
}

double number_at(const json_doc& j, const char* key) {
  const json_doc& v = j.at(key);
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0 || v.get<double>() > 1e15) {
    throw std::invalid_argument(std::string("\"") + key + "\" must be a finite non-negative number, not " + shown(v));
  }
  return v.get<double>();
}

double signed_at(const json_doc& j, const char* key) {
  const json_doc& v = j.at(key);
  if (!v.is_number() || !std::isfinite(v.get<double>()) || std::fabs(v.get<double>()) > 1e15) {
    throw std::invalid_argument(std::string("\"") + key + "\" must be a finite number, not " + shown(v));
  }
  return v.get<double>();
}

json_doc stat_json(const stat_ms& m) {
  return json_doc{{"mean", m.mean}, {"p50", m.p50}, {"p95", m.p95}, {"p99", m.p99}, {"max", m.max}, {"total", m.total}};
}

stat_ms stat_from(const json_doc& j) {
  return stat_ms{number_at(j, "total"), number_at(j, "mean"), number_at(j, "p50"),
                 number_at(j, "p95"),   number_at(j, "p99"),  number_at(j, "max")};
}

bool nests_deeper_than(std::string_view text, std::size_t limit) {
  std::size_t depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return true;
    } else if ((c == ']' || c == '}') && depth != 0) {
      --depth;
    }
  }
  return false;
}

json_doc printable(const json_doc& v) {
  if (v.is_string()) return escaped_controls(v.get_ref<const std::string&>());
  if (v.is_array()) {
    json_doc out = json_doc::array();
    for (const json_doc& e : v) out.push_back(printable(e));
    return out;
  }
  if (v.is_object()) {
    json_doc out = json_doc::object();
    for (const auto& [key, e] : v.items()) out[escaped_controls(key)] = printable(e);
    return out;
  }
  return v;
}

std::string json_words(const nlohmann::json::exception& e) {
  if (const auto* p = dynamic_cast<const nlohmann::json::parse_error*>(&e)) {
    // A file cut short is said as the trace reader says it (profiler/bytes/json_scanner.cpp).
    const bool early = std::string_view(e.what()).find("end of input") != std::string_view::npos;
    return (early ? "the text ends early (a truncated file?) at byte " : "at byte ") + std::to_string(p->byte);
  }
  const std::string what = e.what();
  if (dynamic_cast<const nlohmann::json::out_of_range*>(&e) != nullptr) {
    const auto a = what.find("key '"), b = a == std::string::npos ? a : what.find('\'', a + 5);
    if (b != std::string::npos) return "no \"" + printable_utf8(what.substr(a + 5, b - a - 5)) + "\" field";
    return "a value out of range";
  }
  if (dynamic_cast<const nlohmann::json::type_error*>(&e) != nullptr) return "a field of the wrong kind";
  return "a value it cannot hold";
}

std::string cut_reason(std::string why) {
  if (why.size() > 160) why = why.substr(0, 157) + "...";
  return printable_utf8(why);
}

}  // namespace steptrace::detail
