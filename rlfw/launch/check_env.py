"""``rlfw check-env``: step an env as rlfw will and say, on one screen, how each part of it
maps onto rlfw (buffer leaves, encoders, action distribution, mask) and what is wrong."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from rlfw.buffers.tree import tree_paths
from rlfw.envs import EnvFactory
from rlfw.envs.masks import MASK_KEY, mask_size
from rlfw.envs.multiagent import ColumnsEnv, ParallelColumns
from rlfw.envs.spaces import check_observation_space, leaf_dtype, space_leaves
from rlfw.models.cnn import NatureCNN, SmallCNN
from rlfw.models.encoders import FlattenLeaf, OneHotLeaf, leaf_encoder


@dataclass
class EnvCheck:
    """What ``check_env`` found: the report's lines and one line per problem."""

    lines: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def short_space(space: gym.Space[Any]) -> str:
    """A space in one short phrase (gymnasium's repr prints every bound and nvec entry)."""
    if isinstance(space, gym.spaces.Box):
        low, high = np.min(space.low), np.max(space.high)
        return f"Box({low:.3g} to {high:.3g}, {list(space.shape)}, {space.dtype})"
    if isinstance(space, gym.spaces.MultiDiscrete) and space.nvec.size > 8:
        return f"MultiDiscrete({list(space.shape)}, up to {int(space.nvec.max())} values each)"
    if isinstance(space, gym.spaces.Dict):
        return f"Dict of {len(space.spaces)} ({', '.join(space.spaces)})"
    if isinstance(space, gym.spaces.Tuple):
        return f"Tuple of {len(space.spaces)}"
    return str(space)


def describe_encoder(space: gym.Space[Any]) -> str:
    """How the model reads one observation leaf."""
    encoder = leaf_encoder(space)
    if isinstance(encoder, OneHotLeaf):
        return f"one-hot ({encoder.out_dim})"
    if isinstance(encoder, NatureCNN):
        return f"Nature CNN -> {encoder.out_dim}"
    if isinstance(encoder, SmallCNN):
        return f"small (MinAtar) CNN -> {encoder.out_dim}"
    assert isinstance(encoder, FlattenLeaf)
    return f"flattened as floats ({encoder.out_dim})"


def _actions(space: gym.Space[Any]) -> str:
    if isinstance(space, gym.spaces.Discrete):
        return f"categorical over {space.n} (ppo, a2c, dqn, c51, rainbow, r2d1)"
    if isinstance(space, gym.spaces.MultiDiscrete):
        return f"one categorical per head, nvec {space.nvec.tolist()} (ppo, a2c)"
    if isinstance(space, gym.spaces.MultiBinary):
        return f"one Bernoulli per bit, {int(np.prod(space.shape))} bits (ppo, a2c)"
    if isinstance(space, gym.spaces.Box) and len(space.shape) == 1:
        return f"diagonal Gaussian, {space.shape[0]} dims (ppo, a2c)"
    return "none: rlfw's algorithms take Discrete, MultiDiscrete, MultiBinary or a 1-d Box"


def _leaf_problems(space: gym.Space[Any], obs: Any, where: str) -> list[str]:
    """Each observation leaf against its space: present, the right dtype, inside it."""
    problems = []
    observed = dict(tree_paths(obs))
    for path, leaf in space_leaves(space):
        name = f"observation key {path!r}" if path else "the observation"
        if path not in observed:
            problems.append(f"{where}: {name} is missing from the observation")
            continue
        value = np.asarray(observed[path])
        want = leaf_dtype(leaf)
        if value.dtype != want:
            problems.append(
                f"{where}: {name} arrives as {value.dtype}, its space says {want} (rlfw "
                f"stores {want}: cast it in the env or declare the space's dtype)"
            )
        elif not leaf.contains(value):
            problems.append(f"{where}: {name} = {value.tolist()!r:.80} is outside {leaf}")
    return problems


def _valid_random_action(space: gym.Space[Any], obs: Any, rng: np.random.Generator) -> Any:
    if isinstance(obs, dict) and MASK_KEY in obs and isinstance(space, gym.spaces.Discrete):
        valid = np.flatnonzero(np.asarray(obs[MASK_KEY]))
        if len(valid):
            return int(valid[rng.integers(len(valid))]) + int(space.start)
    return space.sample()


def _random_action(env: gym.Env, obs: Any, rng: np.random.Generator) -> Any:
    """A random valid action; one per column for a many-agent env."""
    if isinstance(env, ColumnsEnv):
        return [_valid_random_action(env.action_space, row, rng) for row in obs]
    return _valid_random_action(env.action_space, obs, rng)


def _rows_problems(env: gym.Env, obs: Any, where: str) -> list[str]:
    if isinstance(env, ColumnsEnv):  # each agent's row against the one space they share
        return [p for row in obs for p in _leaf_problems(env.observation_space, row, where)]
    return _leaf_problems(env.observation_space, obs, where)


def _episode_over(env: gym.Env, terminated: Any, truncated: Any, info: dict[str, Any]) -> bool:
    """The env's episode ended: every agent done for a many-agent env."""
    if isinstance(env, ColumnsEnv):
        return "episode" in info
    return bool(terminated or truncated)


def _play(
    env: gym.Env, seed: int, max_steps: int, report: EnvCheck, episode: int
) -> tuple[float, int, list[float], bool]:
    rng = np.random.default_rng(seed)
    env.action_space.seed(seed)
    obs, _ = env.reset(seed=seed)
    report.problems += _rows_problems(env, obs, f"episode {episode} reset")
    total, steps, rewards = 0.0, 0, []
    while steps < max_steps:
        obs, reward, terminated, truncated, info = env.step(_random_action(env, obs, rng))
        steps += 1
        reward = float(np.sum(np.asarray(reward)))  # a many-agent env's: the team's
        total += reward
        rewards.append(reward)
        found = _rows_problems(env, obs, f"episode {episode} step {steps}")
        if found:
            report.problems += found
            break
        if _episode_over(env, terminated, truncated, info):
            break
    return total, steps, rewards, steps >= max_steps


def _agents_lines(env: ColumnsEnv) -> list[str]:
    """What rlfw does with a many-agent env's agents and its global state."""
    names = getattr(env, "agents", [])
    lines = [
        f"agents {env.columns} ({', '.join(names)}), one space shared by all: each agent is a "
        f"column of the batch (batch_B a multiple of {env.columns}; the family preset takes "
        f"8 envs, {8 * env.columns} columns), one policy shared by every agent (ippo, mappo, "
        "any single-agent algorithm)",
        "episodes end when every agent is done; the logged return is the team's (each "
        "agent's rewards summed); an agent that leaves early adds no row to a policy-gradient "
        "loss",
    ]
    if isinstance(env, ParallelColumns) and callable(getattr(env.env, "state", None)):
        shape = list(np.asarray(env.env.state()).shape)
        lines.append(
            f"state(): {shape} -> mappo's critic input (env_options.global_state, which "
            "mappo's preset sets)"
        )
    else:
        lines.append("state(): none -> mappo cannot run (its critic reads it); ippo can")
    return lines


def _trajectory(factory: EnvFactory, seed: int, steps: int) -> list[Any]:
    env = factory(True)
    try:
        env.action_space.seed(seed)
        rng = np.random.default_rng(seed)
        obs, _ = env.reset(seed=seed)
        out = [obs]
        for _ in range(steps):
            obs, reward, terminated, truncated, info = env.step(_random_action(env, obs, rng))
            out.append((obs, reward))
            if _episode_over(env, terminated, truncated, info):
                obs, _ = env.reset()
                out.append(obs)
        return out
    finally:
        env.close()


def _same(a: Any, b: Any) -> bool:
    pa, pb = tree_paths(a), tree_paths(b)
    return len(pa) == len(pb) and all(
        x == y and np.array_equal(np.asarray(u), np.asarray(v)) for (x, u), (y, v) in zip(pa, pb)
    )


def check_env(
    factory: EnvFactory, episodes: int = 3, max_steps: int = 1000, seed: int = 0
) -> EnvCheck:
    """Build the env as a run would, map its spaces onto rlfw, play ``episodes`` random
    episodes (valid actions only, when it has a mask) of at most ``max_steps``, and replay
    a seeded start twice to see that ``reset(seed=)`` makes it deterministic."""
    report = EnvCheck()
    factory.validate()
    factory = factory.resolved()
    env = factory(True)
    try:
        obs_space, act_space = env.observation_space, env.action_space
        report.lines.append(f"env {factory.env_id}")
        if isinstance(env, ColumnsEnv):
            env.reset(seed=seed)  # the state() an agent line shows is a reset env's
            report.lines += _agents_lines(env)
        report.lines.append(f"observation {short_space(obs_space)}")
        try:
            check_observation_space(obs_space)
        except ValueError as err:
            report.problems.append(str(err))
            return report
        for path, leaf in space_leaves(obs_space):
            shape, name = list(leaf.shape or ()), path or "(the observation)"
            report.lines.append(
                f"  {name}: {short_space(leaf)} -> buffer {leaf_dtype(leaf)} {shape}, "
                f"model: {describe_encoder(leaf)}"
            )
        report.lines.append(f"actions {short_space(act_space)}: {_actions(act_space)}")
        mode = factory.options.action_mask
        has_mask = isinstance(obs_space, gym.spaces.Dict) and MASK_KEY in obs_space.spaces
        if mode == "none" or not has_mask:
            report.lines.append(f"action mask: none (env_options.action_mask={mode})")
        else:
            key = MASK_KEY if mode == "auto" else mode
            source = "info['action_mask']" if mode == "info" else f"observation key {key!r}"
            report.lines.append(f"action mask: from {source}")
            want = mask_size(act_space)
            got = int(np.prod(getattr(obs_space, "spaces")[MASK_KEY].shape or ()))
            if want is None or got != want:
                report.problems.append(
                    f"the action mask has {got} entries; actions {act_space} need "
                    f"{want if want is not None else 'none (they cannot be masked)'}"
                )
        lengths, returns, cut, low, high = [], [], 0, np.inf, -np.inf
        for k in range(episodes):
            try:
                total, steps, rewards, was_cut = _play(env, seed + k, max_steps, report, k)
            except ValueError as err:  # a wrapper's check (a mask of the wrong size, ...)
                report.problems.append(f"episode {k}: {err}")
                return report
            returns.append(total)
            lengths.append(steps)
            cut += int(was_cut)
            if rewards:
                low, high = min(low, min(rewards)), max(high, max(rewards))
        report.lines.append(
            f"{episodes} random episodes: length {min(lengths)}-{max(lengths)}"
            + (f" ({cut} cut at {max_steps} steps)" if cut else "")
            + f", return {min(returns):.3g} to {max(returns):.3g}, reward per step "
            f"{low:.3g} to {high:.3g}"
        )
    finally:
        env.close()
    first, second = _trajectory(factory, seed, 50), _trajectory(factory, seed, 50)
    same = len(first) == len(second) and all(_same(a, b) for a, b in zip(first, second))
    if same:
        report.lines.append("reset(seed=) replays the same 50 steps: deterministic")
    else:
        report.problems.append(
            "two envs reset with the same seed and given the same actions diverge within 50 "
            "steps: reset(seed=) must seed every source of randomness (self.np_random)"
        )
    return report
