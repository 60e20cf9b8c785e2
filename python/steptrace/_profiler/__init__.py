"""torch.profiler in the same process: CUPTI handed to a profiler session and taken back, and
steptrace's steps and phases as ranges in its trace."""
