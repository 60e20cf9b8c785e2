// Internal (not public API): the known name nearest to a misspelt one, for messages that refuse
// an unknown option or variable.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace steptrace::detail {

// " (did you mean X?)" for the name within two edits (a letter added, dropped or changed) and a
// third of its length, else "".
std::string did_you_mean(std::string_view given, const std::vector<std::string_view>& names);

}  // namespace steptrace::detail
