#include "base/near_name.hpp"

#include <algorithm>

namespace steptrace::detail {

// The known name nearest to a misspelt one (edits: a letter added, dropped or changed), if one is
// within two edits and a third of its length: " (did you mean X?)", else "".
std::string did_you_mean(std::string_view given, const std::vector<std::string_view>& names) {
  std::string best;
  std::size_t best_edits = 3;
  for (std::string_view name : names) {
    std::vector<std::size_t> row(name.size() + 1);
    for (std::size_t j = 0; j <= name.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= given.size(); ++i) {
      std::size_t diagonal = row[0];
      row[0] = i;
      for (std::size_t j = 1; j <= name.size(); ++j) {
        const std::size_t above = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (given[i - 1] == name[j - 1] ? 0 : 1)});
        diagonal = above;
      }
    }
    if (row[name.size()] < best_edits && row[name.size()] * 3 <= name.size()) {
      best_edits = row[name.size()];
      best = std::string(name);
    }
  }
  return best.empty() ? "" : " (did you mean " + best + "?)";
}

}  // namespace steptrace::detail
