"""Reading files: one saved summary or torch.profiler trace (a file, a pipe, stdin), and a job's rank
files (a folder, several paths, a glob) read as one job."""
