"""stable-baselines3 set up the way rlfw's preset sets up a run, for envs the zoo has no
settings for (MinAtar): the same envs (rlfw's env factory), batch sizes, hyper-parameters
and network (rlfw's CNN torso as SB3's features extractor, linear heads on it).

What still differs, by construction of the two libraries, is listed by ``differences``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import torch

from rlfw.launch.config import RunConfig
from rlfw.models.cnn import image_torso

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
    if (
        config.algo == "ppo"
        and config.ppo.value_clip is not None
        and config.ppo.value_clip_form != "clipped"
    ):
        out.insert(
            0,
            "SB3 clips the value prediction and takes its squared error; rlfw "
            "takes the larger of the clipped and unclipped errors "
            f"(value_clip_form={config.ppo.value_clip_form!r})",
        )
    return out


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
            return self.torso(observations)

    return RlfwTorso


def sb3_model(config: RunConfig, vec_env: Any, seed: int) -> Any:
    """An SB3 PPO or DQN model with ``config``'s settings (its preset) on ``vec_env``."""
    from stable_baselines3 import DQN, PPO

    policy_kwargs: dict[str, Any] = {
        "features_extractor_class": features_extractor_class(),
        "normalize_images": False,
    }
    if config.algo == "ppo":
        c = config.ppo
        policy_kwargs.update(
            net_arch=dict(pi=[], vf=[]), ortho_init=True, optimizer_kwargs={"eps": c.optimizer_eps}
        )
        return PPO(
            "CnnPolicy",
            vec_env,
            learning_rate=c.learning_rate,
            n_steps=config.batch_T,
            batch_size=c.minibatch_size,
            n_epochs=c.epochs,
            gamma=c.gamma,
            gae_lambda=c.gae_lambda,
            clip_range=c.clip,
            clip_range_vf=c.value_clip,
            normalize_advantage=c.normalize_advantage,
            ent_coef=c.entropy_coef,
            vf_coef=c.value_coef,
            max_grad_norm=c.max_grad_norm,
            policy_kwargs=policy_kwargs,
            seed=seed,
            device="cpu",
            verbose=0,
        )
    if config.algo == "dqn":
        c = config.dqn
        optimizer = {"adam": torch.optim.Adam, "rmsprop": torch.optim.RMSprop}[c.optimizer]
        # rlfw's RMSprop is the A3C paper's (alpha 0.99); Adam takes its eps alone
        extra = {"alpha": 0.99} if c.optimizer == "rmsprop" else {}
        policy_kwargs.update(
            net_arch=[],
            optimizer_class=optimizer,
            optimizer_kwargs={"eps": c.optimizer_eps, **extra},
        )
        steps_per_update = round(1 / c.replay_ratio) if c.replay_ratio <= 1 else 1
        return DQN(
            "CnnPolicy",
            vec_env,
            learning_rate=c.learning_rate,
            buffer_size=c.replay_capacity,
            learning_starts=c.learning_starts,
            batch_size=c.batch_size,
            tau=c.tau,
            gamma=c.gamma,
            train_freq=steps_per_update,
            gradient_steps=max(1, round(c.replay_ratio)),
            target_update_interval=c.target_update_interval,
            exploration_fraction=c.exploration_fraction,
            exploration_initial_eps=c.epsilon_start,
            exploration_final_eps=c.epsilon_final,
            max_grad_norm=c.max_grad_norm or 1e10,
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
    layers = shared_layers(agent.model, model.policy)
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
