// steptrace/detail/tsc.hpp — not API: whether the time-stamp counter can be read here.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define STEPTRACE_HAVE_TSC 1
#endif
