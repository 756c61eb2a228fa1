"""Agent = actor-critic model + action distribution, for PPO and A2C."""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple, Sequence, cast

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlfw.agents.base import (
    AgentState,
    AgentStep,
    ModelAgent,
    Observation,
    invariant_rows,
)
from rlfw.agents.distributions import (
    Bernoulli,
    Categorical,
    DiagGaussian,
    Distribution,
    MultiCategorical,
    StateDependentGaussian,
    keep_valid,
    masked_logits,
)
from rlfw.buffers import AgentInfo, Samples
from rlfw.envs.masks import MASK_KEY
from rlfw.envs.spaces import EnvSpaces, leaf_keys, space_leaves
from rlfw.models import CnnActorCritic, MlpActorCritic
from rlfw.models.cnn import model_kind
from rlfw.models.encoders import EncodedModel, ObservationEncoder, is_fixed_encoder
from rlfw.models.normalize import NormalizedModel
from rlfw.models.recurrent import RecurrentActorCritic, check_core
from rlfw.models.settings import MODEL_DEFAULTS


def distribution_for(
    action_space: gym.Space[Any], algo: str = "ppo/a2c"
) -> Categorical | MultiCategorical | Bernoulli | DiagGaussian:
    """The action distribution of a space: categorical (Discrete), one categorical per
    head (MultiDiscrete), one Bernoulli per bit (MultiBinary), diagonal Gaussian (1-d Box)."""
    if isinstance(action_space, gym.spaces.Discrete):
        return Categorical(int(action_space.n))
    if isinstance(action_space, gym.spaces.MultiDiscrete):
        return MultiCategorical(list(action_space.nvec.reshape(-1)))
    if isinstance(action_space, gym.spaces.MultiBinary):
        return Bernoulli(int(np.prod(action_space.shape)))
    if isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1:
        return DiagGaussian(int(action_space.shape[0]))
    raise ValueError(
        f"action space {action_space} is not supported by {algo}: use Discrete, "
        "MultiDiscrete, MultiBinary or a 1-d Box"
    )


# Encoding a batch once for all its minibatches keeps a float copy of it beside the raw
# observations: done while that copy stays under this size (either way, the same bits).
ENCODE_ONCE_BYTES = 256 << 20


class EncodedObservations(NamedTuple):
    """A batch's observations as the network body's input features, computed once per
    batch by ``training_observations``; the action mask (if the agent uses one) beside
    them."""

    features: torch.Tensor
    action_mask: torch.Tensor | None


def normalized_leaves(space: gym.Space[Any]) -> list[tuple[list[Any], tuple[int, ...]]]:
    """(keys, shape) of the float Box leaves of a nested observation space: the leaves
    ``normalize_obs`` standardizes (codes, images and masks are left as they are)."""
    out = []
    for path, leaf in space_leaves(space):
        if isinstance(leaf, gym.spaces.Box) and np.issubdtype(leaf.dtype, np.floating):
            out.append((leaf_keys(space, path), tuple(leaf.shape)))
    if not out:
        raise ValueError(
            f"normalize_obs standardizes float Box leaves, and the observation {space} "
            "has none: set normalize_obs=false"
        )
    return out


class ActorCriticAgent(ModelAgent):
    """``step(obs, noise)`` samples actions without grad; ``evaluate_actions`` is the
    training pass.
    Greedy (``eval_mode``) means argmax / Gaussian mean."""

    def __init__(
        self,
        model: nn.Module,
        distribution: Distribution,
        action_space: gym.Space[Any],
        device: str | torch.device = "cpu",
    ):
        self.model = model.to(device)
        self.distribution = distribution
        self.action_space = action_space
        self.device = torch.device(device)
        self.greedy = False
        self.masked = False  # acts over the observation's action_mask (``build``)
        self.mask_heads: list[int] | None = None

    @classmethod
    def build(
        cls,
        spaces: EnvSpaces,
        model: str = MODEL_DEFAULTS.model,
        hidden: Sequence[int] = MODEL_DEFAULTS.hidden,
        activation: str = MODEL_DEFAULTS.activation,
        device: str = MODEL_DEFAULTS.device,
        algo: str = "ppo/a2c",
        normalize_obs: bool = MODEL_DEFAULTS.normalize_obs,
        obs_clip: float = MODEL_DEFAULTS.obs_clip,
        log_std_init: float = MODEL_DEFAULTS.log_std_init,
        recurrent: str | None = MODEL_DEFAULTS.recurrent,
        rnn_size: int = MODEL_DEFAULTS.rnn_size,
        rnn_critic: bool = MODEL_DEFAULTS.rnn_critic,
        ortho_init: bool = MODEL_DEFAULTS.ortho_init,
        obs_norm_update: str = MODEL_DEFAULTS.obs_norm_update,
        sde_sample_freq: int = MODEL_DEFAULTS.sde_sample_freq,
        encoders: Mapping[str, nn.Module] | None = None,
        action_mask: bool = False,
    ) -> "ActorCriticAgent":
        """Pick MLP or Nature-CNN from the observation space (``model='auto'``);
        ``normalize_obs`` feeds it running-mean/std normalized, clipped observations,
        their statistics updated by the learner once per batch or, with
        ``obs_norm_update='step'``, by the sampler at every env step; ``recurrent`` ('lstm' or
        'gru') puts a recurrent core of ``rnn_size`` units between the features (the MLP's
        hidden layers, or the CNN) and the heads; ``rnn_critic`` gives the value head its
        own features and core. ``ortho_init=False`` (MLP only) keeps PyTorch's default
        initialization instead of orthogonal weights (SB3's ``ortho_init=False``).
        ``sde_sample_freq`` > 0 (Box actions, MLP): gSDE exploration whose noise matrix is
        resampled every that many env steps (SB3's ``use_sde`` with ``sde_sample_freq``).
        Observations that are not one Box (Dict, Tuple, Discrete, ...) go through per-leaf
        encoders (``ObservationEncoder``; ``encoders`` replaces the default for a key)
        whose concatenated features are the MLP's or recurrent core's input.
        ``action_mask``: the observation's ``action_mask`` leaf limits every action choice,
        log-prob and entropy to the valid actions."""
        check_core(recurrent)
        dist: Categorical | MultiCategorical | Bernoulli | DiagGaussian | StateDependentGaussian
        dist = distribution_for(spaces.action, algo)
        obs_space = spaces.observation
        encoder = None
        if not isinstance(obs_space, gym.spaces.Box):
            # Any other structure: per-leaf encoders, their features the body's input.
            encoder = ObservationEncoder(obs_space, model, encoders)
            obs_space = gym.spaces.Box(-np.inf, np.inf, (encoder.out_dim,), np.float32)
        elif encoders:
            raise ValueError(
                f"encoders are per observation key; the observation {obs_space} is one Box"
            )
        kind = model_kind(model if encoder is None else "mlp", obs_space.shape, obs_space.dtype)
        if (
            isinstance(sde_sample_freq, bool)
            or not isinstance(sde_sample_freq, int)
            or sde_sample_freq < 0
        ):
            raise ValueError(
                f"sde_sample_freq must be an int >= 0 (0: no gSDE), got {sde_sample_freq!r}"
            )
        if sde_sample_freq and not isinstance(dist, DiagGaussian):
            raise ValueError(
                f"sde_sample_freq={sde_sample_freq} (gSDE) is for Box actions; "
                f"{spaces.action} is not one"
            )
        gaussian_dim = dist.dim if isinstance(dist, DiagGaussian) else 0
        if not ortho_init and (recurrent is not None or kind == "cnn"):
            raise ValueError(
                f"ortho_init=False is for the MLP actor-critic; model {kind!r}"
                + (f" with recurrent={recurrent!r}" if recurrent else "")
                + " is always initialized orthogonally"
            )
        if recurrent is not None:
            net: nn.Module = RecurrentActorCritic(
                obs_space.shape,
                dist.n_params,
                recurrent,
                rnn_size,
                hidden,
                activation,
                gaussian_dim,
                log_std_init,
                image=kind == "cnn",
                separate_critic=rnn_critic,
            )
        elif kind == "cnn":
            net = CnnActorCritic(obs_space.shape, dist.n_params, gaussian_dim, log_std_init)
        else:
            net = MlpActorCritic(
                obs_space.shape,
                dist.n_params,
                hidden,
                activation,
                gaussian_dim,
                log_std_init,
                ortho_init,
                sde=sde_sample_freq > 0,
            )
            if sde_sample_freq:  # so dist is a DiagGaussian, of gaussian_dim (checked above)
                head = cast(nn.Linear, net.pi[-1])  # the MLP's output layer
                dist = StateDependentGaussian(gaussian_dim, head.in_features)
        if sde_sample_freq and not isinstance(dist, StateDependentGaussian):
            # checked once the network is built: a CNN's own input errors come first
            raise ValueError(
                f"sde_sample_freq={sde_sample_freq} (gSDE) is for the "
                f"feed-forward MLP actor-critic; model {kind!r}"
                + (f" with recurrent={recurrent!r}" if recurrent else "")
                + " has no gSDE: set sde_sample_freq=0 (a plain Gaussian)"
            )
        if encoder is not None:
            net = EncodedModel(encoder, net)
        if normalize_obs:
            leaves = None if encoder is None else normalized_leaves(spaces.observation)
            if leaves is not None and obs_norm_update != "batch":
                raise ValueError(
                    "obs_norm_update='step' is for one Box observation; a nested one's "
                    "leaves are normalized per batch (obs_norm_update='batch')"
                )
            net = NormalizedModel(net, obs_space.shape, obs_clip, obs_norm_update, leaves)
        elif obs_norm_update != "batch":
            raise ValueError(
                f"obs_norm_update={obs_norm_update!r} needs normalize_obs=True "
                "(there are no observation statistics to update)"
            )
        agent = cls(net, dist, spaces.action, device)
        agent.noise_hold = max(sde_sample_freq, 1)
        if action_mask:
            agent.act_over_mask(spaces.action)
        return agent

    def act_over_mask(self, action_space: gym.Space[Any]) -> None:
        """Act, and compute log-probs and entropies, over the observation's
        ``action_mask`` leaf (Discrete: one entry per action; MultiDiscrete: per head)."""
        if not isinstance(self.distribution, (Categorical, MultiCategorical)):
            raise ValueError(
                f"an action mask limits Discrete or MultiDiscrete actions; "
                f"{action_space} is neither (set env_options.action_mask=none)"
            )
        self.mask_heads = getattr(self.distribution, "nvec", None)
        self.masked = True

    @property
    def noise_shape(self) -> tuple[int, ...]:
        """Shape of the per-slot noise ``step`` consumes (uniforms or standard normals)."""
        return self.distribution.noise_shape

    @property
    def noise_kind(self) -> str:
        return self.distribution.noise_kind

    @property
    def recurrent(self) -> bool:
        return self.state_size > 0

    def _forward(
        self, obs: Observation, state: AgentState
    ) -> tuple[torch.Tensor, torch.Tensor, AgentState, torch.Tensor | None]:
        """(policy params, value, next state, the model's normalized input or None) of one
        step, each row's bits the same however many rows the call has (``invariant_rows``:
        samplers split the slots among workers and groups differently); unpadded when greedy
        (evaluation makes the same calls under every sampler)."""
        return invariant_rows(self._forward_rows, self._obs(obs), state, pad=not self.greedy)

    def _forward_rows(
        self, obs: Any, state: AgentState
    ) -> tuple[torch.Tensor, torch.Tensor, AgentState, torch.Tensor | None]:
        """``_forward`` on the rows as given (tensors on the device)."""
        model, model_input = self.model, None
        if self.per_step_statistics:  # keep what the network saw: the learner needs it
            normalized = cast(NormalizedModel, self.model)  # per-step statistics imply one
            model_input = normalized.normalizer(obs)
            model, obs = normalized.model, model_input
        if self.recurrent:  # a recurrent agent steps from the slots' states
            return (*model(obs, cast(torch.Tensor, state).to(self.device)), model_input)
        params, value = model(obs)
        return params, value, None, model_input

    @torch.no_grad()
    def step(
        self,
        obs: Observation,
        noise: np.ndarray | torch.Tensor,
        slots: Sequence[int] | None = None,
        state: AgentState = None,
    ) -> AgentStep:
        """Actions for ``obs`` from the slots' ``noise``; ``slots`` (which env slots the rows
        are) matters only to agents with per-slot behaviour, such as Ape-X exploration."""
        params, value, next_state, model_input = self._forward(obs, state)
        if self.masked:  # a masked agent's observations are dicts holding the mask
            mask = cast("Mapping[str, np.ndarray | torch.Tensor]", obs)[MASK_KEY]
            params = masked_logits(params, mask, self.mask_heads, slots)
        if self.greedy:
            action = self.distribution.greedy(params)
        else:
            noise_t = torch.as_tensor(noise, device=self.device, dtype=params.dtype)
            action = self.distribution.sample(params, noise_t)
            if self.masked:
                action = keep_valid(params, action, self.mask_heads)
        logp = self.distribution.log_prob(params, action)
        return AgentStep(action, AgentInfo(logp, value, model_input), next_state)

    @torch.no_grad()
    def value(self, obs: Observation, state: AgentState = None) -> torch.Tensor:
        return self._forward(obs, state)[1]

    def training_observations(self, samples: Samples) -> Observation | EncodedObservations:
        """What ``evaluate_actions`` takes for a batch: its observations, or, under per-step
        statistics, the normalized observations the policy acted on. Where everything
        between the observation and the network's first weights is fixed within a batch
        (rlfw's one-hot and flattening leaf encoders, per-batch normalization), the
        ``EncodedObservations`` computed once here: PPO's epochs then re-encode nothing."""
        if self.per_step_statistics:  # ``step`` kept each step's normalized input
            return cast(torch.Tensor, cast(AgentInfo, samples.agent_info).model_input)
        observation = samples.observation
        stages = self._fixed_input_stages()
        if stages is None:
            return observation
        prefix, encoder, _ = stages
        rows = samples.reward.numel()
        if rows * encoder.out_dim * 4 > ENCODE_ONCE_BYTES:
            return observation
        with torch.no_grad():
            features = encoder(prefix(observation) if prefix is not None else observation)
        # a masked agent's observations are dicts holding the mask
        mask = cast("Mapping[str, torch.Tensor]", observation)[MASK_KEY] if self.masked else None
        return EncodedObservations(features, mask)

    def _fixed_input_stages(self) -> tuple[nn.Module | None, ObservationEncoder, nn.Module] | None:
        """(the per-batch normalizer or None, the encoder, the body after it) when the
        encoder holds nothing a gradient step changes; None otherwise."""
        model, prefix = self.model, None
        if isinstance(model, NormalizedModel):
            if model.stats_update != "batch":
                return None
            prefix, model = model.normalizer, model.model
        if not isinstance(model, EncodedModel) or not is_fixed_encoder(model.encoder):
            return None
        return prefix, model.encoder, model.model

    def evaluate_actions(
        self,
        obs: Observation | EncodedObservations,
        action: torch.Tensor,
        state: AgentState = None,
        episode_start: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(log-prob of ``action``, entropy, value), with grad, for the loss, of ``obs``
        as ``training_observations`` gives them. A recurrent agent takes whole sequences:
        ``obs [T, n, ...]`` run from ``state [n, S]`` (the state before step 0), restarting
        from zeros before steps where ``episode_start [T, n]`` is set."""
        params, value = self.evaluate_params(obs, state, episode_start)
        logp, entropy = self.distribution.log_prob_and_entropy(params, action)
        return logp, entropy, value

    def evaluate_params(
        self,
        obs: Observation | EncodedObservations,
        state: AgentState = None,
        episode_start: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(the distribution's parameters, over the action mask if any; value), with grad,
        as ``evaluate_actions`` computes them: for a loss that takes the parameters whole."""
        # per-step statistics: obs are already normalized, so the network proper takes them
        model = cast(NormalizedModel, self.model).model if self.per_step_statistics else self.model
        mask = None
        if isinstance(obs, EncodedObservations):  # encoded already: the body takes them
            stages = self._fixed_input_stages()
            assert stages is not None, "EncodedObservations come from training_observations"
            model, (obs, mask) = stages[2], obs
        elif self.masked:  # a masked agent's observations are dicts holding the mask
            mask = cast("Mapping[str, torch.Tensor]", obs)[MASK_KEY]
        if self.recurrent:  # a recurrent model has forward_sequence
            params, value = getattr(model, "forward_sequence")(obs, state, episode_start)
        else:
            params, value = model(obs)
        if self.masked:  # so mask was read above
            params = masked_logits(params, cast(torch.Tensor, mask), self.mask_heads)
        return params, value

    def env_action(self, action: torch.Tensor) -> np.ndarray:
        """Buffer action -> what ``env.step`` accepts (Box actions clipped to bounds)."""
        act = action.cpu().numpy()
        space = self.action_space
        if isinstance(space, gym.spaces.Box):
            act = np.clip(act, space.low, space.high)
        elif isinstance(space, gym.spaces.Discrete) and space.start:
            act = act + int(space.start)
        elif isinstance(space, gym.spaces.MultiDiscrete):  # heads -> the space's shape, start
            act = act.reshape(act.shape[:-1] + space.shape) + space.start
        elif isinstance(space, gym.spaces.MultiBinary):
            act = act.reshape(act.shape[:-1] + space.shape).astype(space.dtype)
        return act
