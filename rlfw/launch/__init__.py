"""Launching runs: the run config and presets, its assembly (the one path scripts and the
CLI share), the affinity plan, sweeps and evaluation of run folders."""
