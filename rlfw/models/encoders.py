"""Per-leaf encoders for observations of any gymnasium structure, their features
concatenated into one vector that the usual MLP/recurrent bodies and heads take.

Chosen by each leaf's kind and shape: the image torso (sized as for a whole image
observation) for uint8 ``[C, H, W]`` leaves, one-hot codes for ``Discrete`` and
``MultiDiscrete`` leaves, and the flattened values (as floats) for every other Box or
``MultiBinary`` leaf. A user can give their own module for a key (``encoders``)."""

from __future__ import annotations

from typing import Any, Mapping

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlfw.envs.spaces import check_observation_space, leaf_keys, space_leaves
from rlfw.models.cnn import image_torso, model_kind
from rlfw.models.mlp import flatten_obs


class FlattenLeaf(nn.Module):
    """A leaf's own dims merged into one float feature dim, leading dims kept (uint8
    scaled to [0, 1], as ``flatten_obs`` does)."""

    def __init__(self, shape: tuple[int, ...]):
        super().__init__()
        self.ndim = len(shape)
        self.out_dim = int(torch.tensor(shape, dtype=torch.int64).prod()) if shape else 1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return flatten_obs(x, self.ndim)


class OneHotLeaf(nn.Module):
    """``Discrete(n, start)`` / ``MultiDiscrete(nvec)`` codes as concatenated one-hots
    (a code outside its ``[start, start + n)`` is a ``ValueError``)."""

    start: torch.Tensor
    offsets: torch.Tensor
    limits: torch.Tensor

    def __init__(self, nvec: list[int], start: list[int], shape: tuple[int, ...]):
        super().__init__()
        self.ndim = len(shape)
        self.nvec = [int(n) for n in nvec]
        self.register_buffer("start", torch.tensor(start, dtype=torch.int64), persistent=False)
        self.zero_start = not any(start)  # the usual case: codes index the one-hot as they are
        self.out_dim = sum(self.nvec)
        # where each head's block begins in the concatenation, and each head's size
        first = [0, *torch.tensor(self.nvec).cumsum(0)[:-1].tolist()]
        self.register_buffer("offsets", torch.tensor(first, dtype=torch.int64), persistent=False)
        self.register_buffer("limits", torch.tensor(self.nvec, dtype=torch.int64), persistent=False)

    def _codes(self, x: torch.Tensor) -> torch.Tensor:
        # one op fewer each where it can (a step of a small model is a few dozen ops)
        codes = x if x.dtype == torch.int64 else x.long()
        return codes if self.zero_start else codes - self.start

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead = x.shape[: x.dim() - self.ndim]
        codes = self._codes(x.reshape(*lead, len(self.nvec)))
        # The range check reads a flag back to the host, which a compiled graph cannot; a
        # compiled loss trains on observations checked when the policy acted on them.
        if not torch.compiler.is_compiling() and bool(((codes < 0) | (codes >= self.limits)).any()):
            raise ValueError(f"observation codes outside {self._space_text()}")
        if len(self.nvec) > 1:  # each head's codes index its own block
            codes = codes + self.offsets
        # One scatter for every head (MiniGrid's view has 147): a one-hot per head and a
        # concatenation cost a few hundred ops a forward pass.
        out = torch.zeros(*lead, self.out_dim, device=codes.device)
        return out.scatter_(-1, codes, 1.0)

    def _space_text(self) -> str:
        if self.ndim == 0:
            return f"Discrete(n={self.nvec[0]}, start={int(self.start[0])})"
        return f"MultiDiscrete(nvec={self.nvec}, start={self.start.tolist()})"


def is_fixed_encoder(encoder: "ObservationEncoder") -> bool:
    """Whether ``encoder`` is rlfw's own parameter-free leaf encoders only (one-hot codes,
    flattened values): a function of the observation alone, which a learner may apply
    once per batch rather than once per minibatch."""
    return all(type(part) in (FlattenLeaf, OneHotLeaf) for part in encoder.parts)


def leaf_encoder(space: gym.Space[Any], model: str = "auto") -> nn.Module:
    """The default encoder of one leaf space (each has ``out_dim``)."""
    if isinstance(space, gym.spaces.Discrete):
        return OneHotLeaf([int(space.n)], [int(space.start)], ())
    if isinstance(space, gym.spaces.MultiDiscrete):
        nvec, start = space.nvec.reshape(-1), space.start.reshape(-1)
        return OneHotLeaf(list(nvec), list(start), tuple(space.shape))
    shape = tuple(space.shape or ())
    if model != "mlp" and model_kind("auto", shape, np.dtype(space.dtype)) == "cnn":
        return image_torso(shape)
    return FlattenLeaf(shape)


class ObservationEncoder(nn.Module):
    """``obs`` (a tree with leading dims ``[...]``) -> ``[..., out_dim]`` float features:
    one encoder per leaf, in the space's leaf order, outputs concatenated. ``encoders``
    maps a leaf's path (``image``, ``robot.joints``) to a module of the user's with an
    ``out_dim`` attribute, replacing the default for that leaf."""

    def __init__(
        self,
        space: gym.Space[Any],
        model: str = "auto",
        encoders: Mapping[str, nn.Module] | None = None,
    ):
        super().__init__()
        check_observation_space(space)
        given = dict(encoders or {})
        leaves = space_leaves(space)
        unknown = sorted(set(given) - {path for path, _ in leaves})
        if unknown:
            raise ValueError(
                f"encoders given for {unknown}, which are not observation keys; the keys "
                f"are {[path for path, _ in leaves]}"
            )
        self.paths = [path for path, _ in leaves]
        # each leaf's keys from the root: observations arrive as the env built them, whose
        # dict order need not be the space's
        self._keys = [leaf_keys(space, path) for path in self.paths]
        self.parts = nn.ModuleList(
            given.get(path) or leaf_encoder(leaf, model) for path, leaf in leaves
        )
        for path, part in zip(self.paths, self.parts):
            if not isinstance(getattr(part, "out_dim", None), int):
                raise ValueError(f"the encoder for {path!r} has no integer out_dim attribute")
        self.out_dim = sum(int(getattr(part, "out_dim")) for part in self.parts)

    def forward(self, obs: Any) -> torch.Tensor:
        if not isinstance(obs, (dict, tuple)):
            (only,) = self.parts
            features: torch.Tensor = only(obs)
            return features
        out = []
        for part, keys in zip(self.parts, self._keys):
            leaf = obs
            for key in keys:
                leaf = leaf[key]
            out.append(part(leaf))
        return torch.cat(out, dim=-1)


class EncodedModel(nn.Module):
    """A model over encoded features: ``forward(obs, *rest) = model(encoder(obs), *rest)``
    (and ``forward_sequence`` likewise, for recurrent models), so the MLP, recurrent and
    Q-network bodies serve any observation structure unchanged."""

    def __init__(self, encoder: ObservationEncoder, model: nn.Module):
        super().__init__()
        self.encoder = encoder
        self.model = model

    def forward(self, obs: Any, *rest: Any, **kwargs: Any) -> Any:
        return self.model(self.encoder(obs), *rest, **kwargs)

    def forward_sequence(self, obs: Any, *rest: Any, **kwargs: Any) -> Any:
        return getattr(self.model, "forward_sequence")(self.encoder(obs), *rest, **kwargs)

    def __getattr__(self, name: str) -> Any:
        # Heads and attributes the agent reads (``pi``, ``log_std``, ``state_size``, ...)
        # are the inner model's.
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._modules["model"], name)
