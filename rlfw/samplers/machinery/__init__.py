"""What the sampler kinds are built from: worker processes and their shared memory, env
groups, inference scheduling, collectors, evaluation and video. Users pick a kind from
``rlfw.samplers``; a new kind composes these."""
