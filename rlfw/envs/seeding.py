"""Seeds derived from (run seed, purpose, slot) so streams never depend on process layout."""
from __future__ import annotations

import numpy as np

# Purposes: distinct spawn keys keep training, evaluation and action-noise streams apart.
TRAIN_ENV, EVAL_ENV, ACTION_NOISE, EVAL_NOISE = 0, 1, 2, 3


def derive_seed(seed: int, *key: int) -> int:
    """A 31-bit seed for one (purpose, index...) under the run seed."""
    seq = np.random.SeedSequence(entropy=seed, spawn_key=tuple(key))
    return int(seq.generate_state(1)[0] & 0x7FFFFFFF)


def slot_generator(seed: int, *key: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=key)))
