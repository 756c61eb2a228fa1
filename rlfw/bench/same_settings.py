"""stable-baselines3 set up the way rlfw's preset sets up a run, for envs the zoo has no
settings for (MinAtar, MiniGrid, Taxi, board games): the same envs (rlfw's env factory),
batch sizes, hyper-parameters and network (rlfw's CNN torso, or its per-leaf observation
encoder under MLPs, as SB3's features extractor). An env whose observation carries an
invalid-action mask gets sb3-contrib's MaskablePPO over that mask.

What still differs, by construction of the two libraries, is listed by ``differences``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, SupportsFloat, cast

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlfw.envs.masks import MASK_KEY, masks_actions
from rlfw.envs.spaces import space_leaves
from rlfw.launch.config import RunConfig
from rlfw.models.cnn import image_torso, model_kind
from rlfw.models.encoders import ObservationEncoder, leaf_encoder

if TYPE_CHECKING:  # optional (extra [bench]), imported where used
    from sb3_contrib import MaskablePPO
    from stable_baselines3 import PPO
    from stable_baselines3.common.base_class import BaseAlgorithm
    from stable_baselines3.common.vec_env import VecEnv

    from rlfw.agents.base import ModelAgent
    from rlfw.algos import DQNConfig, PPOConfig

DIFFERENCES = {
    "ppo": ("SB3 draws minibatches with numpy's generator, rlfw with torch's",),
    "dqn": (
        "SB3 clips gradients to a norm of 1e10 where rlfw does not clip (no clipping either way)",
        "SB3 anneals ε per env step within the collection loop, rlfw per batch of 32 steps",
        "SB3 updates after every env step; rlfw takes the batch's 32 updates after its "
        "32 steps (the same replay ratio, a staler policy within the batch)",
    ),
}


# rlfw settings SB3 has no choice of: its value loss has one form, the clipped prediction's
# error (``differences`` says where rlfw's differs). Left out of the peer's records, as
# changing them changes nothing the peer runs.
NOT_READ_BY_SB3 = ("ppo.value_clip_form",)


def differences(config: RunConfig) -> list[str]:
    """What differs between rlfw and SB3 run with ``config``'s settings (``sb3_model``)."""
    out = list(DIFFERENCES.get(config.algo, ()))
    ppo: PPOConfig | None = config.algo_config() if config.algo == "ppo" else None
    if ppo is not None and ppo.value_clip is not None and ppo.value_clip_form != "clipped":
        out.insert(
            0,
            "SB3 clips the value prediction and takes its squared error; rlfw "
            "takes the larger of the clipped and unclipped errors "
            f"(value_clip_form={ppo.value_clip_form!r})",
        )
    if ppo is not None and ppo.normalize_reward:
        out.append(
            "where the preset normalizes rewards, SB3's VecNormalize adds each env step's "
            "discounted return to the statistics as it steps, rlfw a batch's returns before "
            "its update (the same rule: rewards over the return's running std, clipped)"
        )
    return out


# Settings the peer runs as rlfw does only at these values; any other is refused (a run
# that silently dropped one would not be on "the same settings").
_MIRRORED_ONLY_AT: dict[str, dict[str, Any]] = {
    "": {"normalize_obs": False, "recurrent": None, "sde_sample_freq": 0},
    "ppo": {"optimizer": "adam", "amp": None},
    "dqn": {
        "double_dqn": False,
        "dueling": False,
        "n_step": 1,
        "prioritized": False,
        "anneal_lr": False,
        "huber_delta": 1.0,
    },
}


def check_mirrored(config: RunConfig) -> None:
    """Raise ``ValueError`` naming each of ``config``'s settings the SB3 peer cannot run
    as rlfw does (``sb3_model`` mirrors every other one it reads)."""
    bad = []
    for group, values in _MIRRORED_ONLY_AT.items():
        if group and group != config.algo:
            continue
        holder = getattr(config, group) if group else config
        for name, allowed in values.items():
            value = getattr(holder, name)
            if value != allowed:
                key = f"{group}.{name}" if group else name
                bad.append(f"{key}={value!r} (the peer runs only {allowed!r})")
    if bad:
        raise ValueError("the SB3 peer cannot run rlfw's settings here: " + "; ".join(bad))


def _schedule(value: float, anneal: bool) -> Any:
    """SB3's form of rlfw's ``linear_schedule``: the value, or a function of the progress
    remaining (1 at the start, 0 at the end) decaying it linearly to 0."""
    return (lambda remaining: value * remaining) if anneal else value


def features_extractor_class() -> type:
    """rlfw's image torso (``image_torso``) as an SB3 ``BaseFeaturesExtractor``."""
    from stable_baselines3.common.torch_layers import BaseFeaturesExtractor

    class RlfwTorso(BaseFeaturesExtractor):
        """The torso rlfw's ``model=auto`` picks for these observations; it scales uint8
        images by 1/255 itself (so SB3's own image scaling is off: normalize_images)."""

        def __init__(self, observation_space: gym.spaces.Box):
            torso = image_torso(observation_space.shape)
            super().__init__(observation_space, torso.out_dim)
            self.torso = torso

        def forward(self, observations: torch.Tensor) -> torch.Tensor:
            features: torch.Tensor = self.torso(observations)
            return features

    return RlfwTorso


def _sb3_leaf(space: gym.Space[Any]) -> gym.Space[Any]:
    """A leaf as SB3 can read it: SB3 one-hot encodes 1-d ``MultiDiscrete`` only, so a
    ``MultiDiscrete`` of more dims (MiniGrid's ``[7, 7, 3]`` tile codes) becomes a Box of
    the same codes, which ``RlfwEncoder`` one-hot encodes as rlfw does."""
    if isinstance(space, gym.spaces.MultiDiscrete) and space.nvec.ndim > 1:
        low = np.asarray(space.start)
        return gym.spaces.Box(low, low + space.nvec - 1, dtype=space.dtype)
    return space


def sb3_observation_space(space: gym.Space[Any]) -> gym.Space[Any]:
    """rlfw's observation space as SB3 takes it: one level of Dict, leaves by ``_sb3_leaf``;
    a ``ValueError`` for what SB3 cannot read (a Tuple, a nested Dict)."""
    if isinstance(space, gym.spaces.Dict):
        nested = [
            k for k, v in space.spaces.items() if isinstance(v, (gym.spaces.Dict, gym.spaces.Tuple))
        ]
        if nested:
            raise ValueError(f"SB3 reads one level of Dict; keys {nested} are nested spaces")
        return gym.spaces.Dict({k: _sb3_leaf(v) for k, v in space.spaces.items()})
    if isinstance(space, gym.spaces.Tuple):
        raise ValueError(f"SB3 reads no Tuple observations: {space}")
    return _sb3_leaf(space)


class Sb3Observations(gym.ObservationWrapper):
    """rlfw's env with its observation space as SB3 reads it (``sb3_observation_space``);
    the observations themselves unchanged."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.observation_space = sb3_observation_space(env.observation_space)

    def observation(self, observation: Any) -> Any:
        return observation


class MaskOfLastObservation(gym.Wrapper):
    """``action_masks()`` as sb3-contrib's MaskablePPO asks for it: the ``action_mask``
    leaf of the observation the env returned last, the one the next action is for."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self._mask: np.ndarray | None = None

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        self._mask = np.asarray(obs[MASK_KEY], bool)
        return obs, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._mask = np.asarray(obs[MASK_KEY], bool)
        return obs, reward, terminated, truncated, info

    def action_masks(self) -> np.ndarray:
        if self._mask is None:
            raise RuntimeError("action_masks() before the env's first reset")
        return self._mask


def is_masked(config: RunConfig, observation_space: gym.Space[Any]) -> bool:
    """Whether rlfw acts over a mask on this env (its factory resolved): the peer then
    runs MaskablePPO."""
    return masks_actions(observation_space, config.env_options.action_mask)


def sb3_env(config: RunConfig, factory: Any, train: bool) -> gym.Env:
    """One env of ``factory`` (``config``'s, resolved) as the SB3 peer steps it."""
    env = factory(train)
    masked = is_masked(config, env.observation_space)
    if not _is_image(config, env.observation_space):
        env = Sb3Observations(env)
    return MaskOfLastObservation(env) if masked else env


def _is_image(config: RunConfig, space: gym.Space[Any]) -> bool:
    """Whether rlfw's model reads this observation with its CNN torso alone."""
    return isinstance(space, gym.spaces.Box) and "cnn" == model_kind(
        config.model, tuple(space.shape), np.dtype(space.dtype)
    )


class _AsDtype(nn.Module):
    """A leaf encoder fed SB3's float copy of the leaf in the leaf's own dtype (so uint8
    values scale and integer codes index as rlfw's encoders expect)."""

    def __init__(self, inner: nn.Module, dtype: torch.dtype):
        super().__init__()
        self.inner, self.dtype = inner, dtype
        self.out_dim = int(getattr(inner, "out_dim"))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features: torch.Tensor = self.inner(x.to(self.dtype))
        return features


class _Sb3OneHot(nn.Module):
    """SB3's one-hot codes of a leaf as ``[batch, width]`` (its rollout buffer keeps a
    ``Discrete`` leaf as ``[1]``, so they arrive as ``[batch, 1, n]`` in updates)."""

    def __init__(self, width: int):
        super().__init__()
        self.out_dim = width

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(len(x), self.out_dim)


def rlfw_encoder_class() -> type:
    """rlfw's per-leaf observation encoder (``ObservationEncoder`` of rlfw's space) as an
    SB3 ``BaseFeaturesExtractor``. SB3 one-hot encodes ``Discrete`` and 1-d
    ``MultiDiscrete`` leaves itself, as rlfw's encoder does, so those pass through; every
    other leaf reaches rlfw's encoder for it in its own dtype."""
    from stable_baselines3.common.torch_layers import BaseFeaturesExtractor

    class RlfwEncoder(BaseFeaturesExtractor):
        def __init__(
            self, observation_space: gym.Space[Any], rlfw_space: gym.Space[Any], model: str
        ):
            parts: dict[str, nn.Module] = {}
            for path, leaf in space_leaves(rlfw_space):
                sb3_leaf = _sb3_leaf(leaf)
                if isinstance(sb3_leaf, (gym.spaces.Discrete, gym.spaces.MultiDiscrete)):
                    width = int(np.sum(getattr(sb3_leaf, "nvec", getattr(sb3_leaf, "n", 0))))
                    parts[path] = _Sb3OneHot(width)
                else:
                    dtype = torch.from_numpy(np.zeros(0, leaf.dtype)).dtype
                    parts[path] = _AsDtype(leaf_encoder(leaf, model), dtype)
            encoder = ObservationEncoder(rlfw_space, model, encoders=parts)
            super().__init__(observation_space, encoder.out_dim)
            self.encoder = encoder

        def forward(self, observations: Any) -> torch.Tensor:
            features: torch.Tensor = self.encoder(observations)
            return features

    return RlfwEncoder


_ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU}


def _ppo_policy(
    config: RunConfig, observation_space: gym.Space[Any], rlfw_space: gym.Space[Any]
) -> tuple[str, dict[str, Any]]:
    """SB3's policy name and kwargs for rlfw's PPO network on this observation: the CNN
    torso with linear heads for an image, else rlfw's encoder under separate policy and
    value MLPs of ``config.hidden`` (rlfw's ``MlpActorCritic``)."""
    if _is_image(config, observation_space):
        return "CnnPolicy", {
            "features_extractor_class": features_extractor_class(),
            "normalize_images": False,
            "net_arch": dict(pi=[], vf=[]),
        }
    if config.activation not in _ACTIVATIONS:
        raise ValueError(
            f"no SB3 activation for activation={config.activation!r}; one of {list(_ACTIVATIONS)}"
        )
    policy = "MultiInputPolicy" if isinstance(observation_space, gym.spaces.Dict) else "MlpPolicy"
    return policy, {
        "features_extractor_class": rlfw_encoder_class(),
        "features_extractor_kwargs": {"rlfw_space": rlfw_space, "model": config.model},
        "normalize_images": False,
        "net_arch": dict(pi=list(config.hidden), vf=list(config.hidden)),
        "activation_fn": _ACTIVATIONS[config.activation],
    }


def sb3_model(
    config: RunConfig, vec_env: VecEnv, seed: int, rlfw_space: gym.Space[Any] | None = None
) -> BaseAlgorithm:
    """An SB3 PPO (MaskablePPO where rlfw acts over a mask) or DQN model with
    ``config``'s settings (its preset) on ``vec_env`` (of ``sb3_env``); ``rlfw_space``:
    the observation space rlfw's model reads (default: ``vec_env``'s)."""
    from stable_baselines3 import DQN, PPO

    if config.algo == "ppo":
        check_mirrored(config)
        c: PPOConfig = config.algo_config()
        space = vec_env.observation_space
        if c.normalize_reward:
            from stable_baselines3.common.vec_env import VecNormalize

            vec_env = VecNormalize(
                vec_env, norm_obs=False, norm_reward=True, clip_reward=c.reward_clip, gamma=c.gamma
            )
        policy, policy_kwargs = _ppo_policy(config, space, rlfw_space or space)
        policy_kwargs.update(
            ortho_init=config.ortho_init, optimizer_kwargs={"eps": c.optimizer_eps}
        )
        if isinstance(vec_env.action_space, gym.spaces.Box):  # the Gaussian's starting std
            policy_kwargs["log_std_init"] = config.log_std_init  # (MaskablePPO takes none)
        ppo: type[PPO] | type[MaskablePPO] = PPO
        if is_masked(config, space):
            from sb3_contrib import MaskablePPO

            ppo = MaskablePPO
        return ppo(
            policy,
            vec_env,
            learning_rate=_schedule(c.learning_rate, c.anneal_lr),
            n_steps=config.batch_T,
            batch_size=c.minibatch_size,
            n_epochs=c.epochs,
            gamma=c.gamma,
            gae_lambda=c.gae_lambda,
            clip_range=_schedule(c.clip, c.anneal_clip),
            clip_range_vf=c.value_clip,
            normalize_advantage=c.normalize_advantage,
            ent_coef=c.entropy_coef,
            vf_coef=c.value_coef,
            max_grad_norm=c.max_grad_norm or 1e10,  # None: no clipping, as in rlfw
            policy_kwargs=policy_kwargs,
            seed=seed,
            device="cpu",
            verbose=0,
        )
    if config.algo == "dqn":
        if not _is_image(config, vec_env.observation_space):
            raise ValueError(
                "the SB3 peer with rlfw's settings runs DQN on image observations only; "
                f"this env observes {vec_env.observation_space}"
            )
        check_mirrored(config)
        d: DQNConfig = config.algo_config()
        optimizer = {"adam": torch.optim.Adam, "rmsprop": torch.optim.RMSprop}[d.optimizer]
        # rlfw's RMSprop is the A3C paper's (alpha 0.99); Adam takes its eps alone
        extra = {"alpha": 0.99} if d.optimizer == "rmsprop" else {}
        policy_kwargs = {
            "features_extractor_class": features_extractor_class(),
            "normalize_images": False,
            "net_arch": [],
            "optimizer_class": optimizer,
            "optimizer_kwargs": {"eps": d.optimizer_eps, **extra},
        }
        steps_per_update = round(1 / d.replay_ratio) if d.replay_ratio <= 1 else 1
        return DQN(
            "CnnPolicy",
            vec_env,
            learning_rate=d.learning_rate,
            buffer_size=d.replay_capacity,
            learning_starts=d.learning_starts,
            batch_size=d.batch_size,
            tau=d.tau,
            gamma=d.gamma,
            train_freq=steps_per_update,
            gradient_steps=max(1, round(d.replay_ratio)),
            target_update_interval=d.target_update_interval,
            exploration_fraction=d.exploration_fraction,
            exploration_initial_eps=d.epsilon_start,
            exploration_final_eps=d.epsilon_final,
            max_grad_norm=d.max_grad_norm or 1e10,
            policy_kwargs=policy_kwargs,
            seed=seed,
            device="cpu",
            verbose=0,
        )
    raise ValueError(
        f"no SB3 counterpart for algo {config.algo!r} with rlfw's settings; one of ppo, dqn"
    )


def shared_layers(model: torch.nn.Module, policy: Any) -> tuple[tuple[Any, Any], ...]:
    """(rlfw module, SB3 module) pairs holding the same layers: rlfw's ``CnnActorCritic``
    and the PPO policy ``sb3_model`` builds (torso, policy head, value head)."""
    return (
        (model.torso, policy.features_extractor.torso),
        (model.pi, policy.action_net),
        (model.v, policy.value_net),
    )


@dataclass
class PairedPPO:
    """An SB3 PPO model and rlfw's PPO agent and learner for the same ``config``, rlfw's
    network holding SB3's initial weights (``layers``: the pairs ``shared_layers`` gives)."""

    envs: Any
    model: Any
    agent: Any
    ppo: Any
    layers: tuple[tuple[Any, Any], ...]


def paired_ppo(config: RunConfig, seed: int, n_itr: int) -> PairedPPO:
    """SB3's PPO on ``config``'s envs (``make_vec_env``, seeded ``seed``) and rlfw's PPO,
    initialized for ``n_itr`` batches, starting from the same weights."""
    from stable_baselines3.common.env_util import make_vec_env

    from rlfw.envs.spaces import EnvSpaces
    from rlfw.launch.build import build_agent, build_algo

    factory = config.env_factory()
    envs = make_vec_env(lambda: factory(True), n_envs=config.batch_B, seed=seed)
    model = sb3_model(config, envs, seed)
    spaces = EnvSpaces.of(factory)
    agent = build_agent(config, spaces)
    # PPO's agent has a model (a ModelAgent); the Agent protocol does not promise one
    layers = shared_layers(cast("ModelAgent", agent).model, model.policy)
    for ours, theirs in layers:
        ours.load_state_dict(theirs.state_dict())
    ppo = build_algo(config, spaces)
    ppo.initialize(agent, n_itr=n_itr, seed=seed)
    return PairedPPO(envs, model, agent, ppo, layers)


def rollout_columns(rollout: Any) -> tuple[torch.Tensor, ...]:
    """An SB3 PPO rollout buffer's ``[T, B]`` arrays, flattened time-major as rlfw's PPO
    takes them: (observation, action, log-prob, value, advantage, return)."""
    return (
        torch.as_tensor(rollout.observations).to(torch.uint8).flatten(0, 1),
        torch.as_tensor(rollout.actions).long().flatten(),
        torch.as_tensor(rollout.log_probs).flatten(),
        torch.as_tensor(rollout.values).flatten(),
        torch.as_tensor(rollout.advantages).flatten(),
        torch.as_tensor(rollout.returns).flatten(),
    )


def rlfw_order(sb3_order: Any, batch_T: int, batch_B: int) -> torch.Tensor:
    """SB3's minibatch order (its flat index e*T + t, env-major) as rlfw's time-major
    index t*B + e, so both draw the same samples in the same order."""
    order = torch.as_tensor(sb3_order)
    return (order % batch_T) * batch_B + order // batch_T
