"""PPO for many agents: IPPO (each agent's critic on its own observation) and MAPPO (a
centralized critic on the env's global state), both with one policy shared by every
agent's column (Yu et al. 2022, "The Surprising Effectiveness of PPO in Cooperative
Multi-Agent Games"). The learner is PPO's; what differs is the network (MAPPO's critic
input, ``rlfw.models.actor_critic.CentralCriticActorCritic``) and the env's observation."""

from __future__ import annotations

from dataclasses import dataclass

from rlfw.algos.pg.ppo import PPO, PPOConfig


@dataclass
class IPPOConfig(PPOConfig):
    """IPPO's settings: PPO's."""


class IPPO(PPO):
    """Independent PPO with shared parameters: PPO over every agent's column."""

    config: IPPOConfig

    @classmethod
    def default_config(cls) -> IPPOConfig:
        return IPPOConfig()


@dataclass
class MAPPOConfig(PPOConfig):
    """MAPPO's settings: PPO's (the centralized critic is the network's)."""


class MAPPO(PPO):
    """PPO over every agent's column with a centralized critic: the value of the env's
    global state from each agent's seat, the policy on the agent's own observation."""

    config: MAPPOConfig

    @classmethod
    def default_config(cls) -> MAPPOConfig:
        return MAPPOConfig()
