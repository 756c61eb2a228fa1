"""The bottom layer: argument checks, seeding, Ctrl-C deferral and the torch.distributed rank
group. Imports nothing else of rlfw."""
