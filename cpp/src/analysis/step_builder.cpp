#include "analysis/step_builder.hpp"

#include "steptrace/phase.hpp"

namespace steptrace::detail {

inline __attribute__((always_inline)) void step_builder::charge(std::uint32_t id, std::uint64_t ticks,
                                                                std::uint32_t calls, std::uint64_t incl) {
  if (id >= acc_.size()) acc_.resize(id + 1);
  phase_acc& a = acc_[id];
  if (!a.touched && (ticks | calls | incl) != 0) {
    a.touched = true;
    touched_.push_back(id);
  }
  a.ticks += ticks;
  a.calls += calls;
  a.incl += incl;
}

// Inclusive time of an open phase, from where it was last charged to t (within the step).
inline __attribute__((always_inline)) void step_builder::add_inclusive(open_phase& p, std::uint64_t t) {
  const std::uint64_t from = p.incl_from > begin_ ? p.incl_from : begin_;
  if (!p.inside_itself && t > from) charge(p.id, 0, 0, t - from);
  p.incl_from = t;
}

inline __attribute__((always_inline)) void step_builder::add_segment(std::uint64_t begin, std::uint64_t end,
                                                                     std::uint32_t id) {
  if (!keep_segments_) return;
  if (!segments_.empty() && segments_.back().end == begin &&
      (segments_.back().phase == id || segments_.size() >= max_segments_)) {
    segments_.back().end = end;  // contiguous: extend (or, at the cap, absorb)
    return;
  }
  host_segment& s = segments_.emplace_back();  // fields stored in place: a temporary copied
  s.begin = begin;                             // whole stalls on store forwarding
  s.end = end;
  s.phase = id;
}

inline __attribute__((always_inline)) void step_builder::add_span(const open_phase& p, std::uint64_t end,
                                                                  std::size_t depth) {
  if (!keep_spans_) return;
  phase_span* slot;
  if (spans_.size() >= max_spans) {  // the ring of the latest: its oldest call is the one let go
    ++spans_dropped_;
    // ...but never an anchor while another call can go instead (a ring all anchors: the oldest).
    for (std::size_t k = 0; k < tail_spans && spans_[max_spans - tail_spans + tail_next_].phase == anchor_; ++k) {
      tail_next_ = (tail_next_ + 1) % tail_spans;
    }
    slot = &spans_[max_spans - tail_spans + tail_next_];
    tail_next_ = (tail_next_ + 1) % tail_spans;
  } else {
    slot = &spans_.emplace_back();
  }
  phase_span& s = *slot;
  s.begin = p.begin > begin_ ? p.begin : begin_;  // a phase opened before the step: from its start
  s.end = end;
  s.phase = p.id;
  s.depth = static_cast<std::uint32_t>(depth);
}

inline __attribute__((always_inline)) void step_builder::advance(std::uint64_t t) {
  if (accounting() && t > last_ && excluding_ == 0) {
    const std::uint32_t id = stack_.empty() ? builtin::other.value : stack_.back().id;
    charge(id, t - last_, 0);
    add_segment(last_, t, id);
  }
  last_ = t;
}

void step_builder::clear_step() {
  set_aside_ = set_aside_in_gap_ = 0;
  for (std::uint32_t id : touched_) acc_[id] = phase_acc{};
  touched_.clear();
  segments_.clear();
  spans_.clear();
  spans_dropped_ = 0;
  tail_next_ = 0;
  stream_mask_ = 0;
  stream_unknown_ = false;
  batch_ = 0;
}

void step_builder::release_capture(step_sink& sink) {
  // A held input no step claimed: report each of its phases as unscoped time.
  for (std::uint32_t id : touched_) sink.on_unscoped(id, acc_[id].ticks);
  clear_step();
  capture_ = capture::none;
}

void step_builder::consume(const record* first, const record* last, step_sink& sink) {
  for (; first != last; ++first) consume_one(*first, sink);
}

const record* step_builder::consume_until_block(const record* first, const record* last, step_sink& sink) {
  for (; first != last; ++first) {
    if (first->kind == record_kind::request_block) return first;
    consume_one(*first, sink);
  }
  return last;
}

inline __attribute__((always_inline)) void step_builder::consume_one(const record& r, step_sink& sink) {
  const std::uint64_t t = r.ticks;
  switch (r.kind) {
    case record_kind::step_begin:
      if (excluding_ > 0 && !in_step_) {  // a step inside a set-aside span: set aside with it
        step_set_aside_ = true;
        break;
      }
      if (capture_ == capture::open) {
        advance(t);  // the input is still open as the step begins: it belongs to this step
      } else if (capture_ == capture::held) {
        if (t > capture_end_ + set_aside_in_gap_) {  // the gap between the fetch and the step
          charge(builtin::other.value, t - capture_end_ - set_aside_in_gap_, 0);
          add_segment(capture_end_, t, builtin::other.value);
        }
      } else {
        clear_step();
        begin_ = t;
      }
      capture_ = capture::none;
      in_step_ = true;
      last_ = t;
      for (auto& p : stack_) p.counted = true;
      break;

    case record_kind::step_end:
    case record_kind::step_end_failed: {
      if (step_set_aside_ && !in_step_) {
        step_set_aside_ = false;
        pair_step_events(false);
        break;
      }
      if (!in_step_) break;  // its begin was lost (records dropped at exit)
      advance(t);
      if (excluding_ > 0) close_exclusion(t);  // a span still open: its part in this step
      for (std::size_t j = 0; j < stack_.size(); ++j) {
        if (!stack_[j].counted) continue;
        add_inclusive(stack_[j], t);  // phases open across the step's end
        add_span(stack_[j], t, j);
      }
      if (discard_step_) {  // began before a reset: belongs to no statistics
        pair_step_events(false);
      } else {
        slices_.clear();
        for (std::uint32_t id : touched_) {
          const phase_acc& a = acc_[id];
          slices_.push_back({id, a.ticks, a.calls, a.incl, a.parent});
        }
        const bool warmup = warming_up();
        const bool failed = r.kind == record_kind::step_end_failed;
        const bool first = !warmup && !failed && !counted_any_;
        counted_any_ = counted_any_ || (!warmup && !failed);
        ++finished_;
        if (batch_ != 0) ++batches_finished_;
        pair_step_events(!warmup && !failed);  // device time of counted steps only
        streams_.clear();
        for (auto mask = stream_unknown_ ? 0 : stream_mask_; mask != 0; mask &= mask - 1) {
          streams_.push_back(stream_table_[__builtin_ctzll(mask)]);  // each stream it used, in order
        }
        sink.on_step(built_step{begin_, t, set_aside_, failed, warmup, first, thread_, finished_ - 1, slices_,
                                segments_, streams_, spans_, spans_dropped_, batch_, requests_});
      }
      discard_step_ = false;
      clear_step();
      in_step_ = false;
      for (auto& p : stack_) p.counted = false;
      break;
    }

    case record_kind::phase_begin: {
      advance(t);
      if (excluding_ > 0) {  // set aside with the span it is in
        open_phase& p = stack_.emplace_back();
        p.id = r.id;
        p.begin = p.incl_from = t;
        p.counted = false;
        p.inside_itself = true;
        p.set_aside = true;
        break;
      }
      if (!in_step_ && stack_.empty() && r.id == builtin::input.value) {
        if (capture_ == capture::held) release_capture(sink);
        clear_step();
        capture_ = capture::open;
        begin_ = t;
        last_ = t;
      }
      bool inside_itself = false;
      for (const open_phase& outer : stack_) inside_itself = inside_itself || outer.id == r.id;
      if (accounting()) {
        charge(r.id, 0, 1);
        acc_[r.id].parent = stack_.empty() ? phase_slice::no_parent : stack_.back().id;
      }
      open_phase& p = stack_.emplace_back();  // in place, as in add_segment
      p.id = r.id;
      p.begin = t;
      p.counted = accounting();
      p.incl_from = t;
      p.inside_itself = inside_itself;
      p.set_aside = false;
      break;
    }

    case record_kind::exclude_begin:
    case record_kind::exclude_end:
      note_exclude(r, sink);
      break;

    case record_kind::event_begin:
    case record_kind::event_end:
    case record_kind::step_event_begin:
    case record_kind::step_event_end:
      note_event(r);
      break;

    case record_kind::stream_scope:
      if (accounting()) note_stream(r.id);
      break;

    case record_kind::batch_size:
      if (in_step_) batch_ = r.id;
      break;

    case record_kind::request_block:  // the drain routes blocks; one seen here is skipped
      break;

    case record_kind::phase_end: {
      // Most ends close the innermost phase of a step with nothing else to settle: its
      // exclusive and inclusive time in one charge. The general case below gives the same.
      if (in_step_ && excluding_ == 0 && end_event_ == no_event && !stack_.empty() && !general_only_) {
        open_phase& p = stack_.back();
        if (p.id == r.id && p.counted && !p.set_aside && !p.inside_itself && p.event == no_event && t >= last_) {
          const std::uint64_t from = p.incl_from > begin_ ? p.incl_from : begin_;
          charge(p.id, t - last_, 0, t > from ? t - from : 0);
          if (t > last_) add_segment(last_, t, p.id);
          last_ = t;
          add_span(p, t, stack_.size() - 1);
          stack_.pop_back();
          break;
        }
      }
      std::size_t i = stack_.size();
      while (i > 0 && stack_[i - 1].id != r.id) --i;
      if (i == 0) {
        ++unbalanced_;  // ends a phase that is not open
        break;
      }
      advance(t);
      unbalanced_ += stack_.size() - i;  // phases closed implicitly by ending an outer one
      for (std::size_t j = stack_.size(); j-- > i - 1;) {
        if (stack_[j].set_aside) continue;
        if (accounting() && stack_[j].counted) {
          add_inclusive(stack_[j], t);
          add_span(stack_[j], t, j);
        }
        if (!stack_[j].counted && !accounting()) sink.on_unscoped(stack_[j].id, t - stack_[j].begin);
        if (stack_[j].event != no_event) {
          // Device time, like host time, is kept out of the statistics during warm-up.
          event_pairs_.push_back(
              {stack_[j].id, stack_[j].event, j == i - 1 ? end_event_ : no_event, !warming_up() && !discard_step_});
        }
      }
      if (stack_[i - 1].event == no_event) free_event(end_event_);  // an end event with no begin to pair
      end_event_ = no_event;
      stack_.resize(i - 1);
      if (capture_ == capture::open && stack_.empty()) {
        capture_ = capture::held;
        capture_end_ = t;
      }
      break;
    }
  }
}

void step_builder::note_exclude(const record& r, step_sink& sink) {
  const std::uint64_t t = r.ticks;
  if (r.kind == record_kind::exclude_begin) {
    if (excluding_ > 0) {  // nested: the outermost span names it
      ++excluding_;
      return;
    }
    advance(t);  // time up to here belongs where it was
    excluding_ = 1;
    for (auto& p : stack_) {
      if (p.counted && accounting()) add_inclusive(p, t);
    }
    exclude_start_ = exclude_cursor_ = t;
    exclude_id_ = r.id;
    return;
  }
  if (excluding_ == 0) {
    ++unbalanced_;  // ends a span that is not open
    return;
  }
  if (--excluding_ > 0) return;
  close_exclusion(t);
  sink.on_set_aside(exclude_id_, exclude_start_, t);
}

// The set-aside span so far [exclude_cursor_, t) leaves the step, or the gap before it.
void step_builder::close_exclusion(std::uint64_t t) {
  const std::uint64_t span = t > exclude_cursor_ ? t - exclude_cursor_ : 0;
  const bool after_fetch = !in_step_ && capture_ == capture::held;  // the step to come claims it
  if (accounting() || after_fetch) set_aside_ += span;
  if (after_fetch) set_aside_in_gap_ += span;
  exclude_cursor_ = t;
  last_ = t;  // the span is charged to no phase
  for (auto& p : stack_) p.incl_from = t;
}

void step_builder::free_event(std::uint32_t& slot) {
  if (slot != no_event) event_pairs_.push_back({0, slot, no_event});
  slot = no_event;
}

void step_builder::pair_step_events(bool timed) {
  if (step_event_ != no_event) {
    event_pairs_.push_back({event_pair::step, step_event_, step_end_event_, timed});
    step_event_ = step_end_event_ = no_event;
  }
  free_event(step_end_event_);
}

void step_builder::note_event(const record& r) {
  if (r.kind == record_kind::step_event_begin) {
    free_event(step_event_);  // a step whose end never came (reset): its slot is freed
    free_event(step_end_event_);
    step_event_ = r.id;
    return;
  }
  if (r.kind == record_kind::step_event_end) {
    free_event(step_end_event_);
    step_end_event_ = r.id;
    return;
  }
  if (r.kind == record_kind::event_begin) {
    if (!stack_.empty() && stack_.back().event == no_event) {
      stack_.back().event = r.id;
    } else if (r.id != no_event) {
      event_pairs_.push_back({0, r.id, no_event});  // nothing to pair with: just free the slot
    }
  } else {
    if (end_event_ != no_event) event_pairs_.push_back({0, end_event_, no_event});
    end_event_ = r.id;
  }
}

void step_builder::note_stream(std::uint32_t index) {
  if (index < max_streams && stream_table_ != nullptr) {
    stream_mask_ |= std::uint64_t{1} << index;
  } else {
    stream_unknown_ = true;
  }
}

void step_builder::finish(step_sink& sink) {
  if (capture_ == capture::held) release_capture(sink);
  drop_open();
}

void step_builder::restart() {
  finished_ = batches_finished_ = unbalanced_ = 0;
  counted_any_ = false;
  if (in_step_) discard_step_ = true;
  if (capture_ != capture::none) {  // a fetch in flight is claimed by no step now
    capture_ = capture::none;
    if (!in_step_) clear_step();
  }
}

void step_builder::rebind(std::uint32_t thread, std::uint32_t warmup_steps) {
  drop_open();
  finished_ = batches_finished_ = unbalanced_ = 0;
  counted_any_ = false;
  thread_ = thread;
  warmup_ = warmup_steps;
}

void step_builder::drop_open() {
  for (const open_phase& p : stack_) {
    if (p.event != no_event) event_pairs_.push_back({p.id, p.event, no_event});  // free the slot
  }
  free_event(end_event_);
  pair_step_events(false);
  clear_step();
  stack_.clear();
  in_step_ = discard_step_ = step_set_aside_ = false;
  excluding_ = 0;
  capture_ = capture::none;
}

}  // namespace steptrace::detail
