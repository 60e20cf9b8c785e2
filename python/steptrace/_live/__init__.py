"""The live view inside the program: windows for listeners (on_window), the tracker bridge (TensorBoard,
wandb, MLflow: log_to), and rank 0's straggler verdict on each live window of every rank."""
