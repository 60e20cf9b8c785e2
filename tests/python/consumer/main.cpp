// Uses only the macros: with STEPTRACE_COMPILED_OUT they compile to nothing.
#include <cstdio>
#include <steptrace/steptrace.hpp>

int main() {
  int work = 0;
  for (int i = 0; i < 8; ++i) {
    STEPTRACE_STEP();
    STEPTRACE_PHASE("compute");
    work += i;
  }
  std::printf("%d\n", work);
}
