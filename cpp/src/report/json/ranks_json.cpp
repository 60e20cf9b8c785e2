// The summary JSON's `rank` and `ranks` sections: who a summary is from, and rank 0's view of
// the job (cpp/src/report/json/README.md, "The summary JSON").
#include <stdexcept>
#include <string>

#include "report/json/json_fields.hpp"

namespace steptrace::detail {
namespace {

// A rank or a world size: never past max_world_size, whatever the file claims.
std::uint32_t rank_count_at(const json_doc& j, const char* key) {
  const std::uint64_t n = count_at(j, key);
  if (n > max_world_size) {
    throw std::invalid_argument(std::string("\"") + key + "\" is " + std::to_string(n) +
                                ", more than the ranks steptrace reads (" + std::to_string(max_world_size) +
                                " at most)");
  }
  return static_cast<std::uint32_t>(n);
}

json_doc refused_json(const std::vector<std::pair<std::uint32_t, std::string>>& refused) {
  json_doc out = json_doc::array();
  for (const auto& [rank, why] : refused) out.push_back({{"rank", rank}, {"reason", why}});
  return out;
}

}  // namespace

json_doc rank_json(const rank_info& r) {
  return json_doc{{"rank", r.rank},
                  {"world_size", r.world_size},
                  {"local_rank", r.local_rank < 0 ? json_doc(nullptr) : json_doc(r.local_rank)},
                  {"host", r.host},
                  {"started_at", r.started_at}};
}

rank_info rank_from(const json_doc& j) {
  rank_info r;
  r.rank = rank_count_at(j, "rank");
  r.world_size = rank_count_at(j, "world_size");
  if (!j.at("local_rank").is_null()) r.local_rank = static_cast<std::int64_t>(count_at(j, "local_rank"));
  r.host = j.at("host").get<std::string>();
  r.started_at = j.at("started_at").get<std::string>();
  if (r.rank >= r.world_size)
    throw std::invalid_argument("rank " + std::to_string(r.rank) + " in a world of " + std::to_string(r.world_size));
  return r;
}

json_doc row_json(const rank_row& r) {
  json_doc row = rank_json(r.who);
  row["steps"] = r.steps;
  row["step_ms"] = {{"mean", r.step_mean_ms}, {"p50", r.step_p50_ms}, {"p95", r.step_p95_ms}};
  row["phase_ms"] = {
      {"input", r.input_ms}, {"h2d", r.h2d_ms}, {"compute", r.compute_ms}, {"wait", r.wait_ms}, {"other", r.other_ms}};
  if (r.device_wait_ms > 0) row["device_wait_ms"] = r.device_wait_ms;
  row["device_busy_share"] = r.device_busy_share ? json_doc(*r.device_busy_share) : json_doc(nullptr);
  row["label"] = r.label.empty() ? json_doc(nullptr) : json_doc(r.label);
  row["slowest_steps"] = r.slowest_steps;
  row["gain"] = r.gain_cause.empty() ? json_doc(nullptr) : json_doc{{"cause", r.gain_cause}, {"share", r.gain}};
  return row;
}

rank_row row_from(const json_doc& row) {
  rank_row r;
  r.who = rank_from(row);
  r.steps = count_at(row, "steps");
  const json_doc& step = row.at("step_ms");
  r.step_mean_ms = number_at(step, "mean");
  r.step_p50_ms = number_at(step, "p50");
  r.step_p95_ms = number_at(step, "p95");
  const json_doc& p = row.at("phase_ms");
  r.input_ms = number_at(p, "input");
  r.h2d_ms = number_at(p, "h2d");
  r.compute_ms = number_at(p, "compute");
  r.wait_ms = number_at(p, "wait");
  r.other_ms = number_at(p, "other");
  if (row.contains("device_wait_ms")) r.device_wait_ms = number_at(row, "device_wait_ms");
  if (!row.at("device_busy_share").is_null()) r.device_busy_share = number_at(row, "device_busy_share");
  if (!row.at("label").is_null()) r.label = row.at("label").get<std::string>();
  r.slowest_steps = count_at(row, "slowest_steps");
  if (row.contains("gain") && !row.at("gain").is_null()) {
    r.gain_cause = row.at("gain").at("cause").get<std::string>();
    r.gain = number_at(row.at("gain"), "share");
  }
  return r;
}

json_doc live_ranks_json(const live_ranks_view& v) {
  json_doc counts = json_doc::array();
  for (const rank_window_count& c : v.counts) {
    counts.push_back({{"rank", c.rank},
                      {"windows", c.windows},
                      {"first_window", c.first_window},
                      {"last_window", c.last_window},
                      {"phase", c.phase},
                      {"pattern", straggler_pattern(c, v.windows)}});
  }
  return {{"windows", v.windows},
          {"straggler", v.straggler ? json_doc(*v.straggler) : json_doc(nullptr)},
          {"late", v.late},
          {"missing", v.missing},
          {"counts", counts}};
}

live_ranks_view live_ranks_from(const json_doc& j) {
  live_ranks_view v;
  v.windows = count_at(j, "windows");
  if (!j.at("straggler").is_null()) v.straggler = static_cast<std::uint32_t>(count_at(j, "straggler"));
  for (const char* key : {"late", "missing"}) {
    const json_doc& list = j.at(key);
    if (!list.is_array() || list.size() > missing_listed)
      throw std::invalid_argument(std::string(key) + ": a list of ranks");
    for (const json_doc& r : list) {
      if (!r.is_number_unsigned() || r.get<std::uint64_t>() >= max_world_size)
        throw std::invalid_argument(std::string(key) + ": not a rank");
      (std::string_view(key) == "late" ? v.late : v.missing)
          .push_back(static_cast<std::uint32_t>(r.get<std::uint64_t>()));
    }
  }
  const json_doc& counts = j.at("counts");
  if (!counts.is_array() || counts.size() > max_world_size) throw std::invalid_argument("counts: a list of ranks");
  for (const json_doc& c : counts) {
    rank_window_count r;
    r.rank = rank_count_at(c, "rank");
    r.windows = count_at(c, "windows");
    r.first_window = count_at(c, "first_window");
    r.last_window = count_at(c, "last_window");
    r.phase = c.at("phase").get<std::string>();
    if (r.windows == 0 || r.windows > v.windows || r.first_window > r.last_window || r.last_window >= v.windows) {
      throw std::invalid_argument("a rank's straggler windows do not fit the windows judged");
    }
    v.counts.push_back(std::move(r));
  }
  return v;
}

json_doc arrivals_json(const arrival_view& a) {
  json_doc ranks = json_doc::array(), calls = json_doc::array();
  for (const arrival_rank& r : a.ranks) {
    ranks.push_back({{"rank", r.rank},
                     {"last", r.last},
                     {"late_ms", r.late_ms},
                     {"before", r.before},
                     {"total_late_ms", r.total_late_ms},
                     {"worst_late_ms", r.worst_late_ms},
                     {"worst_seq", r.worst_seq}});
  }
  json_doc split = json_doc::array();
  for (const collective_split& r : a.split) split.push_back({{"rank", r.rank}, {"wait_ms", r.wait_ms}});
  for (const collective_arrival& c : a.collectives) {
    calls.push_back({{"group", c.group},
                     {"kind", c.kind},
                     {"seq", c.seq},
                     {"last_rank", c.last_rank},
                     {"late_ms", c.late_ms},
                     {"before", c.before},
                     {"transfer_ms", c.transfer_ms}});
  }
  return json_doc{{"compared", a.compared}, {"matched_by", a.matched_by},   {"ranks", ranks},
                  {"collectives", calls},   {"transfer_ms", a.transfer_ms}, {"calls_per_step", a.calls_per_step},
                  {"split", split}};
}

arrival_view arrivals_from(const json_doc& j, std::uint32_t world_size) {
  arrival_view a;
  a.compared = count_at(j, "compared");
  a.matched_by = j.at("matched_by").get<std::string>();
  for (const json_doc& r : j.at("ranks")) {
    arrival_rank read;
    read.rank = rank_count_at(r, "rank");
    read.last = count_at(r, "last");
    read.late_ms = number_at(r, "late_ms");
    read.before = r.at("before").get<std::string>();
    if (r.contains("total_late_ms")) {  // a summary written before the split has none
      read.total_late_ms = number_at(r, "total_late_ms");
      read.worst_late_ms = number_at(r, "worst_late_ms");
      read.worst_seq = count_at(r, "worst_seq");
    }
    if (read.rank >= world_size || read.last > a.compared) {
      throw std::invalid_argument(
          "an arrival's rank is not of the world, or was last at more collectives than compared");
    }
    a.ranks.push_back(std::move(read));
  }
  for (const json_doc& c : j.at("collectives")) {
    if (a.collectives.size() == max_arrival_rows)
      throw std::invalid_argument("more collectives listed than a summary lists");
    collective_arrival read;
    read.group = c.at("group").get<std::string>();
    read.kind = c.at("kind").get<std::string>();
    read.seq = count_at(c, "seq");
    read.last_rank = rank_count_at(c, "last_rank");
    read.late_ms = number_at(c, "late_ms");
    read.before = c.at("before").get<std::string>();
    if (c.contains("transfer_ms")) read.transfer_ms = number_at(c, "transfer_ms");
    if (read.last_rank >= world_size) throw std::invalid_argument("a collective's last rank is not of the world");
    a.collectives.push_back(std::move(read));
  }
  if (j.contains("split")) {
    a.transfer_ms = number_at(j, "transfer_ms");
    a.calls_per_step = number_at(j, "calls_per_step");
    for (const json_doc& r : j.at("split")) {
      if (a.split.size() >= world_size) throw std::invalid_argument("more ranks in the split than the world holds");
      collective_split read{rank_count_at(r, "rank"), number_at(r, "wait_ms")};
      if (read.rank >= world_size) throw std::invalid_argument("a rank in the split is not of the world");
      a.split.push_back(read);
    }
  }
  return a;
}

json_doc ranks_json(const ranks_view& v) {
  json_doc rows = json_doc::array();
  for (const rank_row& r : v.rows) rows.push_back(row_json(r));
  json_doc straggler(nullptr);
  if (const auto& s = v.straggler) {
    straggler = {{"rank", s->rank},
                 {"phase", s->phase},
                 {"excess_ms", s->excess_ms},
                 {"own_wait_ms", s->own_wait_ms},
                 {"others_wait_ms", s->others_wait_ms}};
    if (s->late_ms > 0) straggler["late_ms"] = s->late_ms;
    if (!s->within.empty()) straggler["within"] = {{"phase", s->within}, {"excess_ms", s->within_ms}};
    if (s->arrivals_compared > 0) {
      straggler["arrivals"] = {{"last", s->arrivals_last},
                               {"compared", s->arrivals_compared},
                               {"late_ms", s->arrival_late_ms},
                               {"before", s->before}};
    }
  }
  json_doc out{{"world_size", v.world_size},
               {"rows", rows},
               {"missing", v.missing},
               {"missing_count", v.missing_count},
               {"refused", refused_json(v.refused)},
               {"timeout_s", v.timeout_s},
               {"from_files", v.from_files},
               {"steps_compared", v.steps_compared},
               {"worst", {{"rank", v.worst_rank}, {"ms", v.worst_ms}, {"median_ms", v.median_ms}}},
               {"straggler", straggler}};
  if (v.arrivals) out["arrivals"] = arrivals_json(*v.arrivals);
  if (!v.straggler_refuted.empty()) out["straggler_refuted"] = v.straggler_refuted;
  return out;
}

ranks_view ranks_from(const json_doc& j) {
  ranks_view v;
  v.world_size = rank_count_at(j, "world_size");
  for (const json_doc& row : j.at("rows")) v.rows.push_back(row_from(row));
  for (const json_doc& m : j.at("missing")) {
    if (!m.is_number_unsigned() || m.get<std::uint64_t>() >= v.world_size) {
      throw std::invalid_argument("a missing rank must be a rank of the world, not " + shown(m));
    }
    if (v.missing.size() == missing_listed)
      throw std::invalid_argument("more missing ranks listed than a summary lists");
    v.missing.push_back(static_cast<std::uint32_t>(m.get<std::uint64_t>()));
  }
  v.missing_count =
      j.contains("missing_count") ? rank_count_at(j, "missing_count") : static_cast<std::uint32_t>(v.missing.size());
  if (v.missing_count < v.missing.size() || v.missing_count > v.world_size) {
    throw std::invalid_argument("\"missing_count\" is fewer than the missing ranks listed, or more than the world");
  }
  if (j.contains("refused")) {
    for (const json_doc& r : j.at("refused")) {
      const std::uint32_t rank = rank_count_at(r, "rank");
      if (rank >= v.world_size) throw std::invalid_argument("a refused rank must be a rank of the world");
      v.refused.emplace_back(rank, r.at("reason").get<std::string>());
    }
  }
  v.timeout_s = number_at(j, "timeout_s");
  if (j.contains("from_files")) {
    if (!j.at("from_files").is_boolean()) throw std::invalid_argument("\"from_files\" is not true or false");
    v.from_files = j.at("from_files").get<bool>();
  }
  v.steps_compared = count_at(j, "steps_compared");
  const json_doc& worst = j.at("worst");
  v.worst_rank = rank_count_at(worst, "rank");
  v.worst_ms = number_at(worst, "ms");
  v.median_ms = number_at(worst, "median_ms");
  if (const json_doc& s = j.at("straggler"); !s.is_null()) {
    straggler_info& read = v.straggler.emplace();
    read.rank = rank_count_at(s, "rank");
    read.phase = s.at("phase").get<std::string>();
    read.excess_ms = signed_at(s, "excess_ms");
    read.own_wait_ms = number_at(s, "own_wait_ms");
    read.others_wait_ms = number_at(s, "others_wait_ms");
    if (s.contains("late_ms")) read.late_ms = number_at(s, "late_ms");
    if (s.contains("within")) {
      read.within = s.at("within").at("phase").get<std::string>();
      read.within_ms = number_at(s.at("within"), "excess_ms");
    }
    if (s.contains("arrivals")) {
      const json_doc& a = s.at("arrivals");
      read.arrivals_last = count_at(a, "last");
      read.arrivals_compared = count_at(a, "compared");
      read.arrival_late_ms = number_at(a, "late_ms");
      read.before = a.at("before").get<std::string>();
      if (read.arrivals_last > read.arrivals_compared)
        throw std::invalid_argument("a straggler last at more collectives than compared");
    }
  }
  if (j.contains("arrivals")) v.arrivals = arrivals_from(j.at("arrivals"), v.world_size);
  if (j.contains("straggler_refuted")) v.straggler_refuted = j.at("straggler_refuted").get<std::string>();
  return v;
}

}  // namespace steptrace::detail
