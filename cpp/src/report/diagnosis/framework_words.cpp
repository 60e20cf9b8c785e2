// The program's own terms for a loop run by a framework (the fact `framework`, which
// steptrace.transformers and steptrace.lightning set): the knob its user turns, not the one
// underneath it (report/diagnosis/diagnosis.hpp).
#include <fmt/format.h>

#include "report/diagnosis/diagnosis.hpp"

namespace steptrace::detail {

std::string_view framework_of(const summary& s) {
  const std::string* f = s.fact("framework");
  return f == nullptr ? std::string_view{} : std::string_view(*f);
}

std::string loader_setting(const summary& s, std::string_view name) {
  return framework_of(s) == "transformers" ? fmt::format("dataloader_{}", name) : std::string(name);
}

std::string loader_call(const summary& s, std::string_view args) {
  const std::string_view f = framework_of(s);
  if (f == "transformers") return fmt::format("TrainingArguments({})", args);
  if (f == "lightning") return fmt::format("DataLoader({}) in train_dataloader()", args);
  return fmt::format("DataLoader({})", args);
}

std::string between_steps_words(const summary& s) {
  const std::string_view f = framework_of(s);
  if (f == "lightning") {
    return "Lightning's own work between training steps (callbacks, self.log, the progress bar): a higher "
           "Trainer(log_every_n_steps=...), self.log(..., sync_dist=False) on the step, fewer or cheaper callbacks, "
           "enable_progress_bar=False";
  }
  if (f == "transformers") {
    return "the Trainer's own work between steps (callbacks, logging, the progress bar): a higher "
           "TrainingArguments(logging_steps=...), disable_tqdm=True, fewer or cheaper callbacks";
  }
  return "";
}

}  // namespace steptrace::detail
