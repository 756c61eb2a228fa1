"""PettingZoo's connect four as a single-agent gymnasium env against a fixed opponent
(uniformly random over legal moves by default, or a policy of the user's), registered as
``rlfw/ConnectFour-v0`` when rlfw's env layer loads and ``pettingzoo`` is installed (extra
``[pettingzoo]``). The observation is PettingZoo's own: the board planes and the
``action_mask`` of legal columns, which rlfw's agents act over."""

from __future__ import annotations

import importlib.util
from typing import Any, Callable

import gymnasium as gym
import numpy as np

CONNECT_FOUR = "rlfw/ConnectFour-v0"

Opponent = Callable[[dict[str, np.ndarray]], int]


class BoardGameVsOpponent(gym.Env):
    """A two-player AEC game from the learner's seat: each ``step`` plays the learner's
    move, then the opponent's reply; the reward is the learner's (+1 a win, -1 a loss, 0 a
    draw), given when the game ends. ``learner_first`` picks the seat. ``opponent`` maps
    the opponent's observation (with its ``action_mask``) to a move; None plays a uniformly
    random legal move from this env's seeded RNG."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        make_game: Callable[[], Any],
        opponent: Opponent | None = None,
        learner_first: bool = True,
    ):
        self.game = make_game()
        self.game.reset()
        self.learner = self.game.possible_agents[0 if learner_first else 1]
        self.opponent = opponent
        self.observation_space = self.game.observation_space(self.learner)
        self.action_space = self.game.action_space(self.learner)

    def _over(self) -> bool:
        return any(self.game.terminations.values()) or any(self.game.truncations.values())

    def _opponent_moves(self) -> float:
        """The opponent plays until it is the learner's turn or the game ends; returns
        the learner's reward so far this step."""
        reward = 0.0
        while not self._over() and self.game.agent_selection != self.learner:
            obs = self.game.observe(self.game.agent_selection)
            if self.opponent is not None:
                move = int(self.opponent(obs))
            else:
                legal = np.flatnonzero(obs["action_mask"])
                move = int(legal[self.np_random.integers(len(legal))])
            self.game.step(move)
            reward += float(self.game.rewards[self.learner])
        return reward

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        self.game.reset(seed=None if seed is None else int(seed))
        self._opponent_moves()  # the opponent opens when the learner sits second
        return self.game.observe(self.learner), {}

    def step(self, action: Any) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        self.game.step(int(action))
        reward = float(self.game.rewards[self.learner])
        reward += self._opponent_moves()
        terminated = any(self.game.terminations.values())
        truncated = not terminated and any(self.game.truncations.values())
        return self.game.observe(self.learner), reward, terminated, truncated, {}


def connect_four(opponent: Opponent | None = None, learner_first: bool = True) -> gym.Env:
    """PettingZoo's ``connect_four_v3`` from the first (or second) seat."""
    from pettingzoo.classic import connect_four_v3

    return BoardGameVsOpponent(connect_four_v3.env, opponent, learner_first)


def register_board_envs() -> None:
    """Register ``rlfw/ConnectFour-v0`` (idempotent; nothing without ``pettingzoo``)."""
    if CONNECT_FOUR in gym.registry or importlib.util.find_spec("pettingzoo") is None:
        return
    gym.register(CONNECT_FOUR, entry_point="rlfw.envs.boards:connect_four")
