"""A shareable policy folder (``rlfw export``): the agent's weights as ``model.safetensors``
beside the run's ``config.json`` and a model card. safetensors holds tensors and a string
table only, so reading one never runs code, whoever wrote it."""

from __future__ import annotations

import os

import torch

WEIGHTS = "model.safetensors"
FORMAT = "rlfw-policy/1"


def is_policy_folder(path: str) -> bool:
    """True when ``path`` holds exported weights (``WEIGHTS``) rather than checkpoints."""
    return os.path.isfile(os.path.join(path, WEIGHTS))


def save_policy_weights(
    path: str, weights: dict[str, torch.Tensor], metadata: dict[str, str]
) -> None:
    """``weights`` (an agent's ``state_dict``) to ``path`` with ``metadata`` (strings)."""
    from safetensors.torch import save_file

    # safetensors refuses tensors that share memory or are not contiguous: store copies
    flat = {key: value.detach().to("cpu").contiguous().clone() for key, value in weights.items()}
    save_file(flat, path, metadata={"format": FORMAT, **metadata})


def load_policy_weights(folder: str) -> dict[str, torch.Tensor]:
    """The agent weights of the policy folder ``folder``; ``ValueError`` naming the file
    when it is not an rlfw policy."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    path = os.path.join(folder, WEIGHTS)
    try:
        with safe_open(path, framework="pt") as f:
            found = (f.metadata() or {}).get("format")
        weights = load_file(path)
    except Exception as err:  # a damaged or foreign file: its own error names the problem
        raise ValueError(f"{path} is not a readable safetensors file: {err}") from None
    if found != FORMAT:
        raise ValueError(f"{path} is not an rlfw policy (format {found!r}, expected {FORMAT!r})")
    return weights
