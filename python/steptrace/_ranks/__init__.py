"""Many ranks under torch.distributed: which rank this process is, the gather of every summary to
rank 0, and DDP's all-reduce wait timed as the `collective` phase."""
