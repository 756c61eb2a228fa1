"""A run folder's files: atomic writes, the folder lock, checkpoints (tensors and plain data
only), sealed env state, and claiming a folder for a run."""
