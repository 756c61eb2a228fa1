"""Learning checks with fixed step budgets and reward bounds that fail if learning breaks.
They assert the *final* policy a user gets: runs stop at the target (so the final policy is
the one that reached it) or run to their budget."""

import pytest

from rlfw.launch.build import build_runner
from rlfw.launch.config import RunConfig, apply_overrides, preset
from rlfw.runners import RunSchedule


def train(
    algo: str,
    seed: int,
    budget: int,
    target: float = 475.0,
    sampler: str = "serial",
    env: str = "CartPole-v1",
):
    config = apply_overrides(
        RunConfig(algo=algo, env=env, seed=seed, sampler=sampler, n_workers=2), preset(algo, env)
    )
    config.schedule = RunSchedule(
        n_steps=budget, eval_every=10_000, eval_episodes=10, log_every=budget, stop_at_return=target
    )
    with build_runner(config, None, progress=False, stdout=False) as runner:
        return runner.train()


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_ppo_solves_cartpole_within_120k_steps(seed):
    result = train("ppo", seed, 120_000)
    assert result.eval_return >= 475, result.eval_history
    assert result.env_steps <= 120_000 + 256


@pytest.mark.slow
def test_a2c_solves_cartpole_within_300k_steps():
    result = train("a2c", 0, 300_000)
    assert result.eval_return >= 475, result.eval_history
    assert result.env_steps <= 300_000 + 40


@pytest.mark.slow
@pytest.mark.parametrize("sampler", ["cpu", "gpu", "queue"])
def test_ppo_with_parallel_samplers_solves_cartpole(sampler):
    result = train("ppo", 0, 120_000, sampler=sampler)
    assert result.eval_return >= 475, result.eval_history


@pytest.mark.slow
def test_ppo_solves_a_dict_observation_cartpole_through_worker_processes():
    """CartPole observed as a Dict holding a Box and a Tuple (a Discrete angle bucket and a
    Box): the per-leaf encoders and every leaf's shared-memory block, in the cpu sampler."""
    result = train("ppo", 0, 120_000, sampler="cpu", env="rlfw/CartPoleDict-v1")
    assert result.eval_return >= 475, result.eval_history


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["ppo", "a2c"])
@pytest.mark.parametrize("env", ["rlfw/IdentityMultiDiscrete-v0", "rlfw/IdentityMultiBinary-v0"])
def test_multi_discrete_and_multi_binary_actions_learn_the_identity(algo, env):
    """SB3's identity tasks: 20 steps an episode, the reward the fraction of entries the
    action matches. Random play earns 5.8 (MultiDiscrete [3, 4]) or 10 (MultiBinary 4);
    the heads' summed log-probs and entropies must train every head."""
    result = train(algo, 0, 30_000, target=19.0, env=env)
    assert result.eval_return >= 19.0, result.eval_history


@pytest.mark.slow
@pytest.mark.parametrize("algo,budget", [("ppo", 16_384), ("dqn", 20_000)])
def test_masked_agents_learn_the_invalid_action_identity(algo, budget):
    """sb3-contrib's identity test with invalid actions (20 actions, 10 masked each step,
    100 steps an episode; masked random play earns 10): the mask from an observation key
    limits acting and, for DQN, the target's max. DQN takes sb3-contrib's gamma 0.4."""
    from rlfw.envs import INVALID_ACTION_IDENTITY

    config = apply_overrides(
        RunConfig(algo=algo, env=INVALID_ACTION_IDENTITY), preset(algo, INVALID_ACTION_IDENTITY)
    )
    if algo == "dqn":
        apply_overrides(config, {"dqn": {"gamma": 0.4}})
    config.schedule = RunSchedule(
        n_steps=budget, eval_every=2048, eval_episodes=10, log_every=budget, stop_at_return=90
    )
    with build_runner(config, None, progress=False, stdout=False) as runner:
        result = runner.train()
    assert result.eval_return >= 90, result.eval_history


@pytest.mark.slow
def test_masked_ppo_beats_a_random_connect_four_player_within_20k_steps():
    """PettingZoo's MaskablePPO tutorial reaches a win rate of 0.86 against random play at
    20k steps; random play itself scores about 0.2 from the first seat (59% wins, 40%
    losses). The mask comes from the observation, PettingZoo's own key."""
    from rlfw.envs import CONNECT_FOUR

    config = apply_overrides(RunConfig(env=CONNECT_FOUR), preset("ppo", CONNECT_FOUR))
    config.schedule = RunSchedule(
        n_steps=20_000, eval_every=20_000, eval_episodes=50, log_every=20_000
    )
    with build_runner(config, None, progress=False, stdout=False) as runner:
        result = runner.train()
    assert result.eval_return >= 0.7, result.eval_history
