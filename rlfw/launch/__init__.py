"""Launching runs: checkpoints, run assembly from a config."""
