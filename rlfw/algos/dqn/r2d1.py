"""R2D1 (Kapturowski et al. 2019's R2D2 with one learner, as rlpyt runs it): a recurrent
Q-network learned from replayed sequences. Each sequence starts from the recurrent state the
sampler held at its first step; the first ``burn_in`` steps only run the network forward to
refresh that state; on the next ``learn_steps`` steps the loss is the squared TD error of
n-step double-Q targets under the value rescaling h(x) = sign(x)(√(|x|+1) − 1) + εx; a
sequence's priority is η max|δ| + (1 − η) mean|δ|. Exploration, target copies, the replay
ratio and checkpoints are DQN's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import torch

from rlfw.algos.dqn.dqn import DQN, DQNConfig
from rlfw.algos.optim import gradient_step
from rlfw.buffers import Samples, tree_index
from rlfw.buffers.replay.sequence import SequenceBatch, SequenceReplay
from rlfw.models.recurrent_q import RecurrentQNetwork
from rlfw.utils.checks import check_config

RESCALE_EPS = 1e-3


def rescale(x: torch.Tensor, eps: float = RESCALE_EPS) -> torch.Tensor:
    """h(x) = sign(x)(√(|x| + 1) − 1) + εx (Pohlen et al. 2018)."""
    return x.sign() * ((x.abs() + 1).sqrt() - 1) + eps * x


def unrescale(x: torch.Tensor, eps: float = RESCALE_EPS) -> torch.Tensor:
    """h⁻¹(x), the exact inverse of ``rescale``."""
    root = ((1 + 4 * eps * (x.abs() + 1 + eps)).sqrt() - 1) / (2 * eps)
    return x.sign() * (root.square() - 1)


@dataclass
class R2D1Config(DQNConfig):
    """DQN's settings plus the sequences: ``burn_in`` + ``learn_steps`` (+ ``n_step`` for
    the last targets) rows each, a new one every ``period`` rows; ``eta`` mixes a
    sequence's max and mean |TD| into its priority. The LSTM's units are the run's
    ``rnn_size`` (one setting for every recurrent core).
    ``batch_size`` counts sequences; ``replay_ratio`` is updates per env step as for DQN
    (each update learns ``batch_size x learn_steps`` steps)."""

    burn_in: int = 20
    """Rows of a sequence replayed only to warm the LSTM's state."""
    learn_steps: int = 40
    """Rows of a sequence learned from."""
    period: int = 20
    """Rows between the starts of consecutive sequences."""
    eta: float = 0.9
    """A sequence's priority: eta x max |TD| + (1 - eta) x mean |TD|."""
    n_step: int = 5
    double_dqn: bool = True
    dueling: bool = True
    batch_size: int = 32

    @property
    def length(self) -> int:
        return self.burn_in + self.learn_steps + self.n_step

    def validate(self) -> None:
        super().validate()
        check_config(
            "R2D1Config",
            burn_in=(
                self.burn_in,
                isinstance(self.burn_in, int) and self.burn_in >= 0,
                "must be an int >= 0",
            ),
            learn_steps=(
                self.learn_steps,
                isinstance(self.learn_steps, int) and self.learn_steps >= 1,
                "must be an int >= 1",
            ),
            period=(
                self.period,
                isinstance(self.period, int) and 1 <= self.period <= self.learn_steps,
                f"must be an int in [1, learn_steps={self.learn_steps}] (every step is "
                "learned in some sequence)",
            ),
            eta=(self.eta, 0 <= self.eta <= 1, "must be in [0, 1]"),
            advantage_learning=(
                self.advantage_learning,
                self.advantage_learning == 0,
                "must be 0 for r2d1",
            ),
        )


class R2D1(DQN[RecurrentQNetwork]):
    """Recurrent Q-learning from sequence replay (see the module docstring)."""

    config: R2D1Config
    # Sequences, not DQN's transitions: DQN's code only hands what it samples to ``_learn``
    # and sizes and checkpoints it; what depends on the kind is overridden here.
    replay: SequenceReplay | None  # type: ignore[assignment]

    def __init__(self, config: R2D1Config | None = None):
        super().__init__(config or R2D1Config())

    def _new_replay(  # type: ignore[override]  # see ``replay``
        self, samples: Samples, shared: bool, seed: int, reserve_rows: int
    ) -> SequenceReplay:
        c = self.config
        B = samples.reward.shape[1]

        def multiple(rows: int) -> int:  # of period, rounded up
            return -(-rows // c.period) * c.period

        reserve = multiple(reserve_rows)
        rows = multiple(c.replay_capacity // B) + reserve
        storage = self._storage(samples, rows, shared)
        states = cast(torch.Tensor, samples.agent_state)  # a recurrent agent's batch
        return SequenceReplay(
            storage,
            states.shape[-1],
            c.length,
            c.period,
            alpha=c.priority_alpha if c.prioritized else 0.0,
            beta=c.priority_beta,
            seed=seed,
            reserve_rows=reserve,
        )

    def _set_beta(self, beta: float) -> None:
        assert self.replay is not None  # called while learning from it
        self.replay.beta = beta

    def _learn(  # type: ignore[override]  # see ``replay``
        self, batch: SequenceBatch, stats: dict[str, list[float]]
    ) -> None:
        loss, q_taken, priority = self._sequence_losses(batch)
        norm = gradient_step(self.optimizer, self.flat, loss, self.config.max_grad_norm)
        self.updates += 1
        assert self.replay is not None  # the batch came from it
        self.replay.update_priorities(batch.index, priority.numpy())
        stats["loss"].append(float(loss.detach()))
        stats["q"].append(float(q_taken.mean()))
        stats["grad_norm"].append(norm)
        stats["td_abs"].append(float(priority.mean()))

    def _sequence_losses(
        self, batch: SequenceBatch
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(loss, Q of the learned steps' actions, each sequence's priority)."""
        c = self.config
        online, target = self.agent.q, self.target
        burn, learn = c.burn_in, c.learn_steps
        obs, start = batch.observation, batch.episode_start
        state = batch.initial_state
        with torch.no_grad():  # burn-in: refresh the stored state, no gradient into it
            if burn:
                _, online_state = online.sequence_and_state(
                    tree_index(obs, slice(burn)), state, start[:burn]
                )
                _, target_state = target.sequence_and_state(
                    tree_index(obs, slice(burn)), state, start[:burn]
                )
            else:
                online_state = target_state = state
            rest, rest_start = tree_index(obs, slice(burn, None)), start[burn:]
            target_q = target.forward_sequence(rest, target_state, rest_start)  # [learn+n, N, A]
        q = online.forward_sequence(rest, online_state, rest_start)  # [learn + n, N, A]
        actions = batch.action[burn : burn + learn].long().unsqueeze(-1)
        q_taken = q[:learn].gather(-1, actions).squeeze(-1)  # [learn, N]
        with torch.no_grad():
            y = self._targets(batch, q.detach(), target_q)
        td = q_taken - y
        loss_per_seq = 0.5 * td.square().mean(0)  # [N]
        loss = (batch.weight * loss_per_seq).mean() if c.prioritized else loss_per_seq.mean()
        td_abs = td.detach().abs()
        priority = c.eta * td_abs.max(0).values + (1 - c.eta) * td_abs.mean(0)
        return loss, q_taken.detach(), priority

    def _targets(
        self, batch: SequenceBatch, q: torch.Tensor, target_q: torch.Tensor
    ) -> torch.Tensor:
        """n-step double-Q targets for the learned steps ``[learn, N]``, in the rescaled
        space: h(R + γᵏ h⁻¹(Q_target(s_{t+k}, argmax_a Q(s_{t+k}, a)))), the sum stopped at
        an episode's end (a termination bootstraps nothing; a truncation the sampler's value
        of its final observation)."""
        c = self.config
        burn, learn, n = c.burn_in, c.learn_steps, c.n_step
        reward = batch.reward[burn:].double()
        term, trunc = batch.terminated[burn:], batch.truncated[burn:]
        boot = unrescale(batch.bootstrap_value[burn:].double())
        best = (q if c.double_dqn else target_q).argmax(-1, keepdim=True)
        next_v = unrescale(target_q.gather(-1, best).squeeze(-1).double())  # [learn + n, N]
        ret = torch.zeros(learn, reward.shape[1], dtype=torch.float64)
        discount = torch.ones_like(ret)
        open_ = torch.ones_like(ret, dtype=torch.bool)
        bootstrap = torch.zeros_like(ret)
        for k in range(n):
            r = reward[k : k + learn]
            ret += torch.where(open_, discount * r, 0.0)
            ended_term = open_ & term[k : k + learn]
            ended_trunc = open_ & trunc[k : k + learn]
            discount = torch.where(open_, discount * c.gamma, discount)
            bootstrap = torch.where(ended_trunc, discount * boot[k : k + learn], bootstrap)
            discount = torch.where(ended_term | ended_trunc, 0.0, discount)
            open_ &= ~(ended_term | ended_trunc)
        bootstrap = torch.where(open_, discount * next_v[n : n + learn], bootstrap)
        return rescale(ret + bootstrap).float()
