"""Observations of any gymnasium structure: how each leaf maps to the buffer and the
model, the leaves a buffer cannot hold, and whole runs on a nested observation."""

import dataclasses

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlfw.agents import ActorCriticAgent, actor_critic
from rlfw.envs import CARTPOLE_DICT, EnvFactory, EnvOptions, EnvSpaces
from rlfw.envs.spaces import example_observation, space_leaves
from rlfw.launch.build import build_runner
from rlfw.launch.config import RunConfig
from rlfw.models.encoders import ObservationEncoder
from rlfw.runners import RunSchedule
from rlfw.samplers import SerialSampler
from rlfw.testing import CountingAgent, NestedCountingEnv, TextLeafEnv

from conftest import bits


def test_every_leaf_keeps_its_dtype_and_shape_in_the_space_order():
    space = NestedCountingEnv().observation_space
    assert [path for path, _ in space_leaves(space)] == [
        "count",
        "flags",
        "grid",
        "pair.0",
        "pair.1",
        "step",
    ]
    example = example_observation(space)
    assert example["count"].dtype == np.float32 and example["count"].shape == (3,)
    assert example["flags"].dtype == np.int8
    assert example["grid"].dtype == np.uint8 and example["grid"].shape == (2, 3, 3)
    assert example["pair"][0].dtype == np.int64 and example["pair"][0].shape == (2,)
    assert example["pair"][1].dtype == np.bool_
    assert example["step"].shape == () and example["step"].dtype == np.int64


def test_a_text_leaf_is_refused_by_key_with_the_way_out():
    factory = EnvFactory("text-leaf", entry=TextLeafEnv)
    with pytest.raises(ValueError) as err:
        ActorCriticAgent.build(EnvSpaces.of(factory))
    message = str(err.value)
    assert "'mission'" in message and "Text" in message
    assert "--set env_options.drop_keys=mission" in message
    dropped = EnvFactory("text-leaf", entry=TextLeafEnv, options=EnvOptions(("mission",)))
    with SerialSampler(dropped, 4, 2, seed=0) as sampler:
        samples = sampler.initialize(CountingAgent())
        samples, _ = sampler.obtain_samples(0)
    assert list(samples.observation) == ["count"]
    assert samples.observation["count"][:, 0, 2].tolist() == [0, 1, 2, 0]


def test_dropping_a_key_the_observation_lacks_names_the_keys_it_has():
    factory = EnvFactory("text-leaf", entry=TextLeafEnv, options=EnvOptions(("goal",)))
    with pytest.raises(ValueError, match=r"\['goal'\].*keys are \['count', 'mission'\]"):
        factory()
    flat = EnvFactory("CartPole-v1", options=EnvOptions(("goal",)))
    with pytest.raises(ValueError, match="drops keys of a Dict observation"):
        flat()


def test_discrete_leaves_are_one_hot_and_boxes_flattened():
    space = gym.spaces.Dict(
        {
            "cell": gym.spaces.Discrete(3, start=-1),
            "codes": gym.spaces.MultiDiscrete([2, 3]),
            "vector": gym.spaces.Box(-1, 1, (2, 2), np.float32),
        }
    )
    encoder = ObservationEncoder(space)
    assert encoder.out_dim == 3 + 5 + 4
    obs = {
        "cell": torch.tensor([[1], [-1]]).squeeze(-1),
        "codes": torch.tensor([[1, 2], [0, 0]]),
        "vector": torch.arange(8.0).reshape(2, 2, 2),
    }
    features = encoder(obs)
    assert features.tolist() == [
        [0, 0, 1, 0, 1, 0, 0, 1, 0, 1, 2, 3],
        [1, 0, 0, 1, 0, 1, 0, 0, 4, 5, 6, 7],
    ]
    # leading dims are free: [T, B] observations encode to [T, B, out_dim]
    assert encoder({k: v.expand(3, *v.shape) for k, v in obs.items()}).shape == (3, 2, 12)


def test_one_hot_leaves_concatenate_and_a_code_outside_its_space_is_named():
    """MiniGrid's shape: a Discrete direction (start 1) and a MultiDiscrete view under
    [T, B]; a code outside its leaf's space is a ValueError naming that space."""
    view = gym.spaces.MultiDiscrete(np.full((2, 3), [4, 2, 3]))
    space = gym.spaces.Dict({"direction": gym.spaces.Discrete(4, start=1), "image": view})
    encoder = ObservationEncoder(space)
    obs = {
        "direction": torch.tensor([[1, 4], [2, 3]]),  # leading dims [T=2, B=2]
        "image": torch.tensor([[1, 0, 2], [3, 1, 0]], dtype=torch.uint8).expand(2, 2, 2, 3),
    }
    features = encoder(obs)
    assert features.shape == (2, 2, 4 + 2 * 9)
    assert features[0, 1, :4].tolist() == [0, 0, 0, 1]  # direction 4 of [1, 5)
    assert features[0, 0, 4:13].tolist() == [0, 1, 0, 0, 1, 0, 0, 0, 1]  # the first row
    assert features.sum(-1).eq(1 + 2 * 3).all()  # one hot per head
    for direction in (0, 5):
        with pytest.raises(ValueError, match=r"outside Discrete\(n=4, start=1\)"):
            encoder({**obs, "direction": torch.tensor([[direction, 1], [1, 1]])})
    bad_image = obs["image"].clone()
    bad_image[1, 1, 0, 0] = 4
    with pytest.raises(ValueError, match=r"outside MultiDiscrete\(nvec="):
        encoder({**obs, "image": bad_image})
    # a compiled loss traces the encoder whole (the range check, a host read, is left to
    # the eager pass that acted on the same observations)
    compiled = torch.compile(encoder, fullgraph=True, backend="eager")
    assert torch.equal(compiled(obs), features)


def test_a_users_encoder_replaces_the_default_for_its_key():
    class Sum(torch.nn.Module):
        out_dim = 1

        def forward(self, x):
            return x.float().sum(-1, keepdim=True)

    space = NestedCountingEnv().observation_space
    encoder = ObservationEncoder(space, encoders={"count": Sum()})
    assert isinstance(encoder.parts[0], Sum)
    with pytest.raises(ValueError, match=r"\['cuont'\], which are not observation keys"):
        ObservationEncoder(space, encoders={"cuont": Sum()})


def _dict_config(sampler: str = "serial", runner: str = "sync", algo: str = "ppo") -> RunConfig:
    config = RunConfig(algo=algo, env=CARTPOLE_DICT, sampler=sampler, runner=runner, n_workers=2)
    config.batch_B, config.batch_T = 4, 32
    config.dqn = dataclasses.replace(
        config.dqn, learning_starts=128, replay_capacity=1000, save_replay=True
    )
    if algo == "r2d1":
        config.r2d1 = dataclasses.replace(
            config.algo_config(), learning_starts=384, replay_capacity=1024, save_replay=True
        )
    config.schedule = RunSchedule(
        n_steps=6 * 128, eval_every=256, eval_episodes=2, checkpoint_every=384, log_every=128
    )
    return config


@pytest.mark.integration
@pytest.mark.parametrize(
    "algo,sampler",
    [("ppo", "serial"), ("ppo", "cpu"), ("ppo", "queue"), ("dqn", "serial"), ("r2d1", "serial")],
)
def test_a_nested_observation_run_resumes_bitwise(tmp_path, monkeypatch, algo, sampler):
    """PPO, DQN and R2D1 (their replays holding each leaf) on a Dict observation with a Tuple
    inside: interrupted at iteration 4 and resumed from its checkpoint, a run ends with
    the same weights as one whole run."""
    whole = build_runner(_dict_config(sampler, algo=algo), str(tmp_path / "whole"), progress=False)
    with whole:
        whole.train()
    part = build_runner(_dict_config(sampler, algo=algo), str(tmp_path / "part"), progress=False)
    real = type(part.sampler).obtain_samples

    def interrupt_at_4(self, itr):
        if itr == 4:
            raise KeyboardInterrupt
        return real(self, itr)

    monkeypatch.setattr(type(part.sampler), "obtain_samples", interrupt_at_4)
    with part:
        assert part.train().interrupted
    monkeypatch.setattr(type(part.sampler), "obtain_samples", real)
    resumed = build_runner(
        _dict_config(sampler, algo=algo), str(tmp_path / "part"), resume=True, progress=False
    )
    with resumed:
        resumed.train()
    a, b = whole.agent.state_dict(), resumed.agent.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(bits(a[k]), bits(b[k])) for k in a)


@pytest.mark.integration
@pytest.mark.parametrize("algo,runner", [("ppo", "concurrent"), ("dqn", "async")])
def test_nested_observations_run_through_the_concurrent_and_async_runners(tmp_path, algo, runner):
    config = _dict_config(runner=runner, algo=algo)
    with build_runner(config, str(tmp_path / "run"), progress=False) as run:
        result = run.train()
    assert result.env_steps == 6 * 128 and len(result.eval_history) >= 1


def test_normalize_obs_standardizes_the_float_leaves_of_a_nested_observation():
    spaces = EnvSpaces.of(EnvFactory("nested", entry=NestedCountingEnv))
    agent = ActorCriticAgent.build(spaces, normalize_obs=True)
    with SerialSampler(EnvFactory("nested", entry=NestedCountingEnv), 7, 5, seed=3) as sampler:
        samples = sampler.initialize(agent)
        samples, _ = sampler.obtain_samples(0)
    agent.update_normalization(samples.observation)
    (count,) = agent.model.normalizer.parts  # one float Box leaf: 'count'
    rows = samples.observation["count"].reshape(-1, 3).double()
    assert torch.allclose(count.stats.mean, rows.mean(0), atol=1e-3)  # the prior count
    normalized = agent.model.normalizer(samples.observation)
    assert torch.equal(normalized["grid"], samples.observation["grid"])  # images untouched
    assert normalized["count"].abs().max() <= 10.0 and normalized["count"].dtype == torch.float32
    with pytest.raises(ValueError, match="obs_norm_update='step' is for one Box"):
        ActorCriticAgent.build(spaces, normalize_obs=True, obs_norm_update="step")
    codes = EnvSpaces(gym.spaces.Dict({"a": gym.spaces.Discrete(3)}), gym.spaces.Discrete(2))
    with pytest.raises(ValueError, match="has none: set normalize_obs=false"):
        ActorCriticAgent.build(codes, normalize_obs=True)


_TRAINING_OBSERVATIONS = ActorCriticAgent.training_observations


def _train_weights(config: RunConfig, monkeypatch, encode_once: bool, seen: list) -> dict:
    """The weights after a short run, with the batch encoded once or every minibatch."""
    monkeypatch.setattr(actor_critic, "ENCODE_ONCE_BYTES", (256 << 20) if encode_once else 0)
    real = _TRAINING_OBSERVATIONS

    def spy(self, samples):
        out = real(self, samples)
        seen.append(isinstance(out, actor_critic.EncodedObservations))
        return out

    monkeypatch.setattr(ActorCriticAgent, "training_observations", spy)
    config.schedule = RunSchedule(
        n_steps=3 * 128, eval_every=None, log_every=10_000, checkpoint_every=10_000
    )
    with build_runner(config, None, progress=False, stdout=False) as runner:
        runner.train()
        return {k: v.clone() for k, v in runner.agent.state_dict().items()}


@pytest.mark.parametrize(
    "env,settings",
    [
        ("Taxi-v4", {}),  # one-hot codes, the action mask from info
        (CARTPOLE_DICT, {"normalize_obs": True}),  # flattened leaves behind the normalizer
        (CARTPOLE_DICT, {"recurrent": "gru"}),  # sequences of features
    ],
)
def test_encoding_a_batch_once_trains_the_same_bits_as_every_minibatch(env, settings, monkeypatch):
    """Where the leaf encoders hold no parameters, PPO encodes each batch once for all its
    epochs; the run's weights are the same bits as encoding every minibatch."""

    def config() -> RunConfig:
        c = RunConfig(algo="ppo", env=env, batch_B=4, batch_T=32, seed=5, **settings)
        c.ppo.epochs, c.ppo.minibatch_size = 3, 32
        return c

    once, each = [], []
    a = _train_weights(config(), monkeypatch, True, once)
    b = _train_weights(config(), monkeypatch, False, each)
    assert once and all(once) and each and not any(each)
    assert a.keys() == b.keys() and all(torch.equal(bits(a[k]), bits(b[k])) for k in a)
