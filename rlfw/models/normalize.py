"""Running mean/std statistics for observation normalization and reward scaling, as in
SB3's VecNormalize and CleanRL's continuous PPO.

Observation statistics are updated either once per ``[T, B]`` batch (``'batch'``: the
learner merges the whole batch after its update) or once per env step (``'step'``:
VecNormalize's rule; the sampler merges each step's full ``[B]`` row, in slot order,
before the policy acts on it). Either way rows are merged in one step (Chan et al.'s
parallel variance), in float64, from complete rows: the statistics depend only on what
the envs produced, never on how many workers stepped them, so every sampler's run stays
bitwise identical. Statistics
are module buffers: they travel with the weights to sampler workers, go into checkpoints
with the agent (or algorithm), and stay frozen wherever nothing calls ``update``
(evaluation, ``rlfw eval``).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence, cast

import torch
from torch import nn


class RunningMeanStd(nn.Module):
    """Mean and variance of every row ever passed to ``update``, per feature."""

    mean: torch.Tensor
    var: torch.Tensor
    count: torch.Tensor

    def __init__(self, shape: Sequence[int] = (), epsilon: float = 1e-4):
        super().__init__()
        self.register_buffer("mean", torch.zeros(tuple(shape), dtype=torch.float64))
        self.register_buffer("var", torch.ones(tuple(shape), dtype=torch.float64))
        # a tiny prior count, as VecNormalize: the first batch dominates at once
        self.register_buffer("count", torch.tensor(epsilon, dtype=torch.float64))

    @torch.no_grad()
    def update(self, rows: torch.Tensor) -> None:
        """Merge ``rows`` (``[N, *shape]``) into the statistics."""
        rows = rows.detach().to(self.mean.device, torch.float64).reshape(-1, *self.mean.shape)
        n = rows.shape[0]
        if n == 0:
            return
        batch_mean = rows.mean(0)
        batch_var = rows.var(0, unbiased=False)
        delta = batch_mean - self.mean
        total = self.count + n
        m2 = self.var * self.count + batch_var * n + delta.square() * self.count * n / total
        self.mean.add_(delta * n / total)
        self.var.copy_(m2 / total)
        self.count.copy_(total)

    def std(self, epsilon: float = 1e-8) -> torch.Tensor:
        return torch.sqrt(self.var + epsilon)


class ObservationNormalizer(nn.Module):
    """``clip((obs - mean) / std, -clip, clip)`` as float32 (the models' dtype)."""

    def __init__(self, shape: Sequence[int], clip: float = 10.0):
        super().__init__()
        if not clip > 0:
            raise ValueError(f"observation clip must be > 0, got {clip!r}")
        self.clip = float(clip)
        self.stats = RunningMeanStd(shape)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        dtype = torch.float32
        mean = self.stats.mean.to(dtype)
        std = self.stats.std().to(dtype)
        return torch.clamp((obs.to(dtype) - mean) / std, -self.clip, self.clip)


def _leaf(obs: Any, keys: list[Any]) -> Any:
    for key in keys:
        obs = obs[key]
    return obs


def _replaced(obs: Any, keys: list[Any], value: Any) -> Any:
    """``obs`` with the leaf at ``keys`` replaced (dicts and tuples rebuilt, not mutated)."""
    if not keys:
        return value
    head, rest = keys[0], keys[1:]
    if isinstance(obs, dict):
        return {**obs, head: _replaced(obs[head], rest, value)}
    items = list(obs)
    items[head] = _replaced(items[head], rest, value)
    return tuple(items)


class TreeNormalizer(nn.Module):
    """Per-leaf ``ObservationNormalizer``s for some leaves of a nested observation (the
    float Box ones: codes, images and masks are not standardized); the rest pass through.
    ``leaves``: (keys from the root, leaf shape) of each normalized leaf."""

    def __init__(self, leaves: list[tuple[list[Any], tuple[int, ...]]], clip: float = 10.0):
        super().__init__()
        self.keys = [keys for keys, _ in leaves]
        self.parts = nn.ModuleList(ObservationNormalizer(shape, clip) for _, shape in leaves)

    def forward(self, obs: Any) -> Any:
        for keys, part in zip(self.keys, self.parts):
            obs = _replaced(obs, keys, part(_leaf(obs, keys)))
        return obs

    @torch.no_grad()
    def update(self, obs: Any) -> None:
        """Merge the rows of each normalized leaf (``[N, *shape]``) into its statistics."""
        for keys, part in zip(self.keys, self.parts):
            cast(ObservationNormalizer, part).stats.update(_leaf(obs, keys))


OBS_NORM_UPDATES = ("batch", "step")


class NormalizedModel(nn.Module):
    """``model`` fed normalized observations; ``update_normalization`` adds rows to the
    statistics. ``update`` says who adds them and when (``OBS_NORM_UPDATES``): the learner
    once per batch, or the sampler once per env step."""

    def __init__(
        self,
        model: nn.Module,
        obs_shape: Sequence[int],
        clip: float = 10.0,
        update: str = "batch",
        leaves: list[tuple[list[Any], tuple[int, ...]]] | None = None,
    ):
        super().__init__()
        if update not in OBS_NORM_UPDATES:
            raise ValueError(
                f"observation statistics update {update!r} is unknown; choose "
                f"from {OBS_NORM_UPDATES}"
            )
        # ``leaves``: a nested observation, normalized leaf by leaf
        self.normalizer: ObservationNormalizer | TreeNormalizer = (
            ObservationNormalizer(obs_shape, clip)
            if leaves is None
            else TreeNormalizer(leaves, clip)
        )
        self.model = model
        self.stats_update = update

    @property
    def state_size(self) -> int:
        """The wrapped model's recurrent state size (0: feed-forward)."""
        return int(getattr(self.model, "state_size", 0))

    # Any: whatever the wrapped model returns (an actor-critic's tuple, a Q-network's values)
    def forward(self, obs: torch.Tensor, *state: torch.Tensor) -> Any:
        return self.model(self.normalizer(obs), *state)

    def forward_sequence(
        self, obs: torch.Tensor, state: torch.Tensor, episode_start: torch.Tensor
    ) -> Any:
        return getattr(self.model, "forward_sequence")(self.normalizer(obs), state, episode_start)

    def update_normalization(self, observations: Any) -> None:
        if isinstance(self.normalizer, TreeNormalizer):
            self.normalizer.update(observations)
        else:
            self.normalizer.stats.update(observations)


class RewardScaler:
    """Rewards divided by the running std of the discounted return, then clipped.

    Each env slot keeps its discounted return ``G <- gamma * G + r`` (reset where an
    episode ended); every batch adds all of its ``G`` values to the statistics, then its
    rewards are scaled by their std (VecNormalize's rule, batch by batch). The per-slot
    returns are sized by the first batch. ``gather`` (multi-rank runs) concatenates every
    rank's returns, so all ranks keep the same statistics."""

    def __init__(
        self,
        gamma: float,
        clip: float = 10.0,
        gather: Callable[[torch.Tensor], torch.Tensor] | None = None,
    ):
        if not clip > 0:
            raise ValueError(f"reward clip must be > 0, got {clip!r}")
        self.gamma, self.clip, self.gather = float(gamma), float(clip), gather
        self.stats = RunningMeanStd(())
        self.returns: torch.Tensor | None = None

    @torch.no_grad()
    def __call__(self, reward: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
        """Scaled ``reward`` (``[T, B]``), after adding this batch to the statistics."""
        if self.returns is None:
            self.returns = torch.zeros(reward.shape[1], dtype=torch.float64)
        if reward.shape[1] != self.returns.shape[0]:
            raise ValueError(
                f"reward scaler holds returns of {self.returns.shape[0]} env "
                f"slots, got a batch with {reward.shape[1]}"
            )
        seen = torch.empty(reward.shape, dtype=torch.float64)
        returns = self.returns
        for t in range(reward.shape[0]):
            returns = returns * self.gamma + reward[t].to(torch.float64)
            seen[t] = returns
            returns = torch.where(done[t].bool(), torch.zeros_like(returns), returns)
        self.returns = returns
        self.stats.update(seen if self.gather is None else self.gather(seen))
        scaled = reward.to(torch.float64) / self.stats.std()
        return torch.clamp(scaled, -self.clip, self.clip).to(reward.dtype)

    def state_dict(self) -> dict[str, Any]:
        return {"stats": self.stats.state_dict(), "returns": self.returns}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.stats.load_state_dict(state["stats"])
        self.returns = None if state["returns"] is None else state["returns"].clone()
