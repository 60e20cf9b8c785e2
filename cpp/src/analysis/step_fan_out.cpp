// One finished step to every keeper on the list, in the order they were added.
#include "analysis/step_fan_out.hpp"

#include <algorithm>
#include <stdexcept>

namespace steptrace::detail {
namespace {

template <class... F>
struct each_kind : F... {
  using F::operator()...;
};
template <class... F>
each_kind(F...) -> each_kind<F...>;

}  // namespace

step_fan_out& step_fan_out::push(keeper k) {
  if (used_ == max_keepers) throw std::length_error("step_fan_out: more keepers than max_keepers");
  keepers_[used_++] = k;
  return *this;
}

step_fan_out& step_fan_out::add(aggregate& a) { return push(&a); }
step_fan_out& step_fan_out::add(recent_window& r) { return push(&r); }
step_fan_out& step_fan_out::add(flight_recorder& f) { return push(&f); }
step_fan_out& step_fan_out::add(back_ring& b) { return push(&b); }
step_fan_out& step_fan_out::add(step_keeper& k) { return push(&k); }
step_fan_out& step_fan_out::add_batches(aggregate& a) {
  batches_ = &a;
  return *this;
}

void step_fan_out::on_step(const built_step& s) {
  if (s.batch != 0 && batches_ != nullptr) {  // a batch is not a request: counted apart
    batches_->on_step(s);
    return;
  }
  ++steps_;
  const auto to = each_kind{
      [&](recent_window* r) {
        if (s.warmup || s.failed) return;  // the recent window holds counted steps
        const std::uint64_t length = s.end - s.begin;
        r->on_step(s, length - std::min(s.set_aside, length));
      },
      [&](auto* k) { k->on_step(s); },
  };
  for (std::size_t i = 0; i < used_; ++i) std::visit(to, keepers_[i]);
}

void step_fan_out::on_unscoped(std::uint32_t id, std::uint64_t ticks) {
  const auto to = each_kind{
      [&](aggregate* a) { a->on_unscoped(id, ticks); }, [&](step_keeper* k) { k->on_unscoped(id, ticks); },
      [](auto*) {},  // the recent window and the kept steps hold steps only
  };
  for (std::size_t i = 0; i < used_; ++i) std::visit(to, keepers_[i]);
}

void step_fan_out::on_set_aside(std::uint32_t id, std::uint64_t begin, std::uint64_t end) {
  const auto to = each_kind{
      [&](aggregate* a) { a->on_set_aside(id, begin, end); },
      [](recent_window*) {},
      [&](auto* k) { k->on_set_aside(thread_, id, begin, end); },
  };
  for (std::size_t i = 0; i < used_; ++i) std::visit(to, keepers_[i]);
}

}  // namespace steptrace::detail
