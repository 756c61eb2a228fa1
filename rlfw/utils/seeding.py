"""Every seed in a run, in one place: per-(purpose, slot) streams derived from the run seed
(so streams never depend on process layout), the process-global seeding of model
initialisation, and capture/restore of the global RNGs for checkpoints."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch

# Purposes: distinct spawn keys keep training, evaluation and action-noise streams apart.
TRAIN_ENV, EVAL_ENV, ACTION_NOISE, EVAL_NOISE = 0, 1, 2, 3


def derive_seed(seed: int, *key: int) -> int:
    """A 31-bit seed for one (purpose, index...) under the run seed."""
    seq = np.random.SeedSequence(entropy=seed, spawn_key=tuple(key))
    return int(seq.generate_state(1)[0] & 0x7FFFFFFF)


def slot_generator(seed: int, *key: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=key)))


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch's global generators (model initialisation uses them)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def capture_rng() -> dict[str, Any]:
    """The process-global RNG states: python, numpy and torch."""
    return {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }


def restore_rng(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
