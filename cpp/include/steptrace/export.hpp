// steptrace: symbol export macro. Everything else in libsteptrace is hidden.
#pragma once

#if defined(_WIN32)
#define STEPTRACE_API
#elif defined(STEPTRACE_BUILDING)
#define STEPTRACE_API __attribute__((visibility("default")))
#else
#define STEPTRACE_API
#endif
