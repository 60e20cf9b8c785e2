// Internal (not public API): which tracer state a recording thread writes into.
//
// The hot path reads one initial-exec TLS slot (t_binding, detail/ring.hpp). Everything here
// runs only when that slot does not match: a thread's first record into a tracer, a switch
// between tracers, a forked child, a thread whose steptrace state was already destroyed.
#pragma once

#include <cstddef>
#include <cstdint>

namespace steptrace::detail {

class tracer_impl;
struct thread_state;

// Tracers are registered while they live, so an exiting thread never touches a dead one.
void register_tracer(tracer_impl& impl);
void unregister_tracer(tracer_impl& impl);
std::uint64_t next_tracer_uid() noexcept;
// A forked child's copy of a tracer is never destroyed: its mutex and condition variable may be
// held by, or waited on by, threads that do not exist there. It is kept here instead.
void keep_forked_copy(tracer_impl* impl);

// This thread's state in `impl`, attaching the thread on its first record. nullptr (the
// record is dropped) in a forked child's inherited tracer, once this thread's steptrace state
// was destroyed (a step recorded from a later thread_local or static destructor), or out of
// memory.
thread_state* lookup_slow(tracer_impl& impl) noexcept;

// How many tracers this thread holds links to (for tests: dead ones must not pile up).
std::size_t thread_link_count() noexcept;

// Installs the fork handler once per process (the first tracer does).
void install_fork_guard();

}  // namespace steptrace::detail
