// The hang section of a summary's JSON (summary::hang; steptrace/hang.hpp): the steps open now,
// the last collectives, and whether it is a suspected hang.
#include <stdexcept>

#include "report/json/json_fields.hpp"

namespace steptrace::detail {
namespace {

constexpr std::size_t max_read = 4096;  // threads, phases, collectives or steps a file may list

const json_doc& list_at(const json_doc& j, const char* key) {
  const json_doc& v = j.at(key);
  if (!v.is_array() || v.size() > max_read)
    throw std::invalid_argument(std::string("hang: \"") + key + "\" is not a list");
  return v;
}

std::string text_at(const json_doc& j, const char* key) {
  const json_doc& v = j.at(key);
  if (!v.is_string()) throw std::invalid_argument(std::string("hang: \"") + key + "\" is not text");
  return v.get<std::string>();
}

}  // namespace

json_doc hang_json(const hang_view& h) {
  json_doc threads = json_doc::array();
  for (const open_step_now& t : h.threads) {
    json_doc phases = json_doc::array();
    for (const open_phase_now& p : t.phases) phases.push_back({{"phase", p.phase}, {"open_s", p.open_s}});
    threads.push_back({{"thread", t.thread}, {"step", t.step}, {"open_s", t.open_s}, {"phases", phases}});
  }
  json_doc collectives = json_doc::array();
  for (const collective_mark& c : h.collectives) {
    collectives.push_back({{"group", c.group},
                           {"kind", c.kind},
                           {"seq", c.seq},
                           {"entered_s", c.entered_s},
                           {"left_s", c.left_s < 0 ? json_doc(nullptr) : json_doc(c.left_s)}});
  }
  const open_step_now* longest = h.longest();
  return {{"suspected", h.suspected},
          {"stuck_s", longest ? longest->open_s : 0.0},
          {"phase", h.phase()},
          {"hang_after_s", h.hang_after_s},
          {"threads", threads},
          {"collectives", collectives},
          {"last_steps_ms", h.last_steps_ms},
          {"report", h.report}};
}

hang_view hang_from(const json_doc& j) {
  if (!j.is_object()) throw std::invalid_argument("hang: not an object");
  hang_view h;
  if (!j.at("suspected").is_boolean()) throw std::invalid_argument("hang: \"suspected\" is not true or false");
  h.suspected = j.at("suspected").get<bool>();
  h.hang_after_s = number_at(j, "hang_after_s");
  for (const json_doc& t : list_at(j, "threads")) {
    open_step_now& s = h.threads.emplace_back();
    s.thread = static_cast<std::uint32_t>(count_at(t, "thread"));
    s.step = count_at(t, "step");
    s.open_s = number_at(t, "open_s");
    for (const json_doc& p : list_at(t, "phases")) s.phases.push_back({text_at(p, "phase"), number_at(p, "open_s")});
  }
  for (const json_doc& c : list_at(j, "collectives")) {
    collective_mark& m = h.collectives.emplace_back();
    m.group = text_at(c, "group");
    m.kind = text_at(c, "kind");
    m.seq = count_at(c, "seq");
    m.entered_s = number_at(c, "entered_s");
    m.left_s = c.at("left_s").is_null() ? -1.0 : number_at(c, "left_s");
  }
  for (const json_doc& ms : list_at(j, "last_steps_ms")) {
    if (!ms.is_number() || ms.get<double>() < 0) throw std::invalid_argument("hang: a step time that is not one");
    h.last_steps_ms.push_back(ms.get<double>());
  }
  h.report = text_at(j, "report");
  return h;
}

}  // namespace steptrace::detail
