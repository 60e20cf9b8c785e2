"""Capture on trouble: when the run turns bad, a profiler trace (or the core's own capture) of the
next steps, planned across ranks through torch.distributed's store, read back and diagnosed."""
