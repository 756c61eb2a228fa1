"""Every sampler against the serial one: exact arrays, determinism, faults, learning."""

import time

import numpy as np
import pytest
import torch

from rlfw.agents import ActorCriticAgent
from rlfw.agents.random_agent import RandomAgent
from rlfw.buffers import tree_map
from rlfw.buffers.tree import tree_paths
from rlfw.envs import EnvFactory, EnvSpaces
from rlfw.samplers import (
    AlternatingSampler,
    ParallelCpuSampler,
    SerialSampler,
    WorkerError,
)
from rlfw.testing import (
    ContinuousCountingEnv,
    CountingAgent,
    CountingEnv,
    NestedCountingEnv,
    RaisingEnv,
    SelfKillingEnv,
    elementwise_gaussian_agent,
)

from conftest import children, sampler_kinds, shm_entries, trees_equal

# Every registered sampler (rlfw's and the test plugins'), each against the serial one.
ALL = sampler_kinds()
PARALLEL = {name: make for name, make in ALL.items() if name != "serial"}


def collect(sampler, agent, n_batches):
    sampler.initialize(agent)
    out = []
    for itr in range(n_batches):
        samples, episodes = sampler.obtain_samples(itr)
        out.append((tree_map(torch.clone, samples), sorted(episodes)))
    return out


@pytest.mark.parametrize("kind", list(PARALLEL))
def test_counting_env_samples_equal_the_serial_samplers_exactly(kind):
    factory = EnvFactory("counting", entry=CountingEnv)
    # B=5 over 2 workers: uneven split; T=7 crosses terminated and truncated episode ends.
    with SerialSampler(factory, 7, 5, seed=11, debug=True) as reference:
        expected = collect(reference, CountingAgent(), 3)
    with ALL[kind](factory, 7, 5, 11) as sampler:
        got = collect(sampler, CountingAgent(), 3)
    for (exp_samples, exp_eps), (got_samples, got_eps) in zip(expected, got):
        assert trees_equal(exp_samples, got_samples)
        assert exp_eps == got_eps
    assert all(
        any(getattr(s, end).any() for s, _ in expected) for end in ("terminated", "truncated")
    )
    assert sum(s.bootstrap_value.abs().sum() for s, _ in expected) > 0


@pytest.mark.parametrize("kind", list(PARALLEL))
def test_final_observations_of_truncated_steps_equal_the_serial_samplers_exactly(kind):
    """An agent that keeps final observations (SAC's, TD3's) gets each truncated step's
    true last observation ``[tag, episode, length]`` in the batch from every sampler, bit
    for bit the serial one's, and no values (the learner bootstraps from the
    observation)."""
    factory = EnvFactory("counting", entry=CountingEnv)
    with SerialSampler(factory, 7, 5, seed=11, debug=True) as reference:
        expected = collect(reference, CountingAgent(keeps_final_observation=True), 3)
    with ALL[kind](factory, 7, 5, 11) as sampler:
        got = collect(sampler, CountingAgent(keeps_final_observation=True), 3)
    for (exp_samples, exp_eps), (got_samples, got_eps) in zip(expected, got):
        # rows of steps not truncated are stale by contract: only the truncated ones count
        truncated = exp_samples.truncated
        assert torch.equal(
            exp_samples.final_observation[truncated], got_samples.final_observation[truncated]
        )
        assert trees_equal(
            exp_samples._replace(final_observation=None),
            got_samples._replace(final_observation=None),
        )
        assert exp_eps == got_eps
    lengths = torch.tensor(CountingEnv().lengths, dtype=torch.float32)
    final = torch.cat([s.final_observation[s.truncated] for s, _ in expected])
    assert len(final) and torch.equal(final[:, 2], lengths[final[:, 1].long() % 3])
    assert all(s.bootstrap_value.eq(0).all() for s, _ in expected)


@pytest.mark.parametrize("kind", list(PARALLEL))
def test_noise_held_for_several_steps_equals_the_serial_samplers_exactly(kind):
    """gSDE's noise serves ``noise_hold`` steps per draw: every sampler hands each slot
    the same held draws as the serial one, across batch ends (T=7 is no multiple of 3)."""
    factory = EnvFactory("counting", entry=CountingEnv)
    with SerialSampler(factory, 7, 5, seed=11, debug=True) as reference:
        expected = collect(reference, CountingAgent(noise_hold=3), 3)
    with ALL[kind](factory, 7, 5, 11) as sampler:
        got = collect(sampler, CountingAgent(noise_hold=3), 3)
    for (exp_samples, exp_eps), (got_samples, got_eps) in zip(expected, got):
        assert trees_equal(exp_samples, got_samples)
        assert exp_eps == got_eps
    # the serial sampler's noise (the agent's logp) per slot: 21 steps, 7 draws of 3 each
    u = torch.cat([s.agent_info.logp for s, _ in expected])
    draws = u.reshape(7, 3, 5)
    assert draws.eq(draws[:, :1]).all() and draws[:, 0].unique().numel() == 35


@pytest.mark.parametrize("kind", list(PARALLEL))
def test_box_actions_equal_the_serial_samplers_exactly(kind):
    """A Gaussian actor-critic agent with normalized observations on a Box-action env:
    every sampler's batches (actions, log-probs, values, bootstraps) equal the serial
    sampler's bits. Its model has no matrix products, whose bits depend on how many rows
    one call gets (a worker's share vs all B)."""
    factory = EnvFactory("continuous-counting", entry=ContinuousCountingEnv)
    runs = []
    for make in (ALL["serial"], PARALLEL[kind]):
        torch.manual_seed(0)
        agent = elementwise_gaussian_agent(EnvSpaces.of(factory))
        agent.update_normalization(torch.linspace(-3, 9, 60).reshape(4, 5, 3))
        with make(factory, 7, 5, 11) as sampler:
            runs.append(collect(sampler, agent, 3))
    for (a, eps_a), (b, eps_b) in zip(*runs):
        assert trees_equal(a, b) and eps_a == eps_b
    first = runs[0][0][0]
    assert first.action.shape[-1] == 2 and first.action.dtype == torch.float32
    assert first.action.ne(first.action.round()).any()  # real Gaussian samples


@pytest.mark.parametrize("kind", list(ALL))
def test_same_seed_twice_is_bitwise_identical_with_a_stochastic_agent(kind):
    factory = EnvFactory("CartPole-v1")
    runs = []
    for _ in range(2):
        torch.manual_seed(0)
        agent = ActorCriticAgent.build(EnvSpaces.of(factory))
        with ALL[kind](factory, 32, 4, 5) as sampler:
            runs.append(collect(sampler, agent, 3))
    for (a, eps_a), (b, eps_b) in zip(*runs):
        assert trees_equal(a, b) and eps_a == eps_b
    assert runs[0][0][0].done.any()  # episodes did end inside the batches


@pytest.mark.isolated
@pytest.mark.parametrize("kind", list(PARALLEL))
@pytest.mark.parametrize(
    "env_cls,message",
    [
        (RaisingEnv, "RaisingEnv: deliberate failure at step 9"),
        (SelfKillingEnv, "killed by signal 9"),
    ],
)
def test_worker_fault_surfaces_fast_with_cleanup(kind, env_cls, message):
    shm_before = shm_entries()
    key = "raise_at" if env_cls is RaisingEnv else "kill_at"
    factory = EnvFactory("faulty", entry=env_cls, kwargs=((key, 9),))
    sampler = ALL[kind](factory, 8, 4, 0)
    sampler.initialize(CountingAgent())
    assert len(children()) >= 2
    start = time.monotonic()
    with pytest.raises(WorkerError, match=message) as err:
        for itr in range(3):  # the failing step (9) lies inside the second batch
            sampler.obtain_samples(itr)
    assert time.monotonic() - start < 5.0
    if env_cls is RaisingEnv:
        assert "Traceback" in str(err.value) and "testing/envs.py" in str(err.value)
    deadline = time.monotonic() + 5
    while children() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert children() == [], "worker processes left behind"
    sampler.close()
    sampler.close()  # idempotent
    assert shm_entries() <= shm_before, "shared memory leaked"


def test_close_is_idempotent_and_leaves_nothing():
    factory = EnvFactory("counting", entry=CountingEnv)
    sampler = ParallelCpuSampler(factory, 4, 2, 0, n_workers=2)
    sampler.initialize(CountingAgent())
    sampler.obtain_samples(0)
    sampler.close()
    sampler.close()
    assert children() == []


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(n_workers=3, batch_B=2), "n_workers=3 exceeds batch_B=2"),
        (dict(n_workers=0, batch_B=2), "n_workers must be a positive integer"),
    ],
)
def test_bad_worker_counts(kwargs, message):
    factory = EnvFactory("counting", entry=CountingEnv)
    with pytest.raises(ValueError, match=message):
        ParallelCpuSampler(factory, 4, **kwargs)


def test_alternating_needs_an_even_number_of_workers():
    factory = EnvFactory("counting", entry=CountingEnv)
    with pytest.raises(ValueError, match="n_workers=3 must be a multiple of 2"):
        AlternatingSampler(factory, 4, 6, n_workers=3)


def test_worker_startup_failure_reports_the_traceback():
    factory = EnvFactory("counting", entry=CountingEnv, kwargs=(("no_such_arg", 1),))
    sampler = ParallelCpuSampler(factory, 4, 2, 0, n_workers=2)
    with pytest.raises((WorkerError, TypeError), match="no_such_arg"):
        sampler.initialize(CountingAgent())
    sampler.close()
    assert children() == []


@pytest.mark.integration
def test_native_atari_layout_determinism_and_real_episode_statistics():
    from rlfw.samplers import NativeAtariSampler

    factory = EnvFactory("ALE/SpaceInvaders-v5")
    runs = []
    for _ in range(2):
        torch.manual_seed(0)
        agent = ActorCriticAgent.build(EnvSpaces.of(factory))
        with NativeAtariSampler(factory, 128, 2, seed=4) as sampler:
            runs.append(collect(sampler, agent, 6))
    for (a, eps_a), (b, eps_b) in zip(*runs):
        assert trees_equal(a, b) and eps_a == eps_b
    samples = [s for s, _ in runs[0]]
    episodes = [e for _, eps in runs[0] for e in eps]
    assert samples[0].observation.shape == (128, 2, 4, 84, 84)
    assert samples[0].observation.dtype == torch.uint8
    assert set(torch.cat([s.reward.flatten() for s in samples]).tolist()) <= {0.0, 1.0}
    # Lives are lost (training episodes end) more often than whole games end...
    life_ends = sum(int(s.terminated.sum()) for s in samples)
    assert episodes and life_ends > len(episodes)
    # ...and the statistics report whole games with real (unclipped) scores.
    assert all(e.ret % 5 == 0 for e in episodes) and max(e.ret for e in episodes) > 1


class _MeanPixelValueAgent(RandomAgent):
    """Random actions; V(obs) = mean pixel of each frame stack: a value per row with no
    matrix product, so it cannot depend on how many rows one forward pass gets."""

    def value(self, obs, state=None) -> torch.Tensor:
        return torch.as_tensor(obs).float().mean(dim=(1, 2, 3))


@pytest.mark.integration
def test_native_groups_give_the_same_samples_and_games():
    """Splitting the games into groups (one stepping while the other's actions are chosen)
    and the per-batch accounting of lives, clipped rewards and whole-game statistics give
    the same bits with 1, 2 or 3 groups: across life losses, truncations (bootstrapped from
    the true final frame) and batch ends, with an uneven split of 5 games."""
    from dataclasses import replace

    from rlfw.envs.atari import AtariOptions
    from rlfw.samplers import NativeAtariSampler

    factory = EnvFactory(
        "ALE/SpaceInvaders-v5", atari=replace(AtariOptions(), max_episode_frames=1200)
    )
    runs = {}
    for n_groups in (1, 2, 3):
        agent = _MeanPixelValueAgent(EnvSpaces.of(factory).action)
        with NativeAtariSampler(factory, 64, 5, seed=3, n_groups=n_groups, debug=True) as s:
            runs[n_groups] = collect(s, agent, 6)
    for (a, eps_a), (b, eps_b), (c, eps_c) in zip(runs[1], runs[2], runs[3]):
        assert trees_equal(a, b) and trees_equal(a, c) and eps_a == eps_b == eps_c
    samples = [s for s, _ in runs[1]]
    truncated = torch.stack([s.truncated for s in samples])
    terminated = torch.stack([s.terminated for s in samples])
    boot = torch.stack([s.bootstrap_value for s in samples])
    assert truncated.sum() == 5 and terminated.sum() > 5  # 300 steps per game; lives lost
    assert (boot[truncated] > 0).all() and (boot[terminated] == 0).all()
    games = [e for _, eps in runs[1] for e in eps]
    assert len(games) == 5 and all(e.length == 300 and e.ret % 5 == 0 for e in games)


def test_native_sampler_refuses_a_bad_group_count():
    from rlfw.samplers import NativeAtariSampler

    with pytest.raises(ValueError, match="n_groups must be an int from 1 to batch_B=2, got 3"):
        NativeAtariSampler(EnvFactory("ALE/Pong-v5"), 4, 2, n_groups=3)


def test_native_sampler_refuses_non_atari_ids():
    from rlfw.samplers import NativeAtariSampler

    with pytest.raises(ValueError, match="ALE games only"):
        NativeAtariSampler(EnvFactory("CartPole-v1"), 4, 2)


@pytest.mark.integration
def test_unguarded_script_under_spawn_gets_a_hint(tmp_path):
    import subprocess
    import sys

    script = tmp_path / "unguarded.py"
    script.write_text(
        "from rlfw.envs import EnvFactory\n"
        "from rlfw.samplers import ParallelCpuSampler\n"
        "from rlfw.testing import CountingAgent, CountingEnv\n"
        "sampler = ParallelCpuSampler(EnvFactory('c', entry=CountingEnv), 4, 2, n_workers=1)\n"
        "sampler.initialize(CountingAgent())\n"
    )
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert run.returncode != 0
    assert "if __name__ == '__main__':" in run.stderr and "WorkerError" in run.stderr


def test_native_sampler_resume_warns_and_restarts_games():
    from rlfw.samplers import NativeAtariSampler

    factory = EnvFactory("ALE/Pong-v5")
    agent = RandomAgent(EnvSpaces.of(factory).action)
    with NativeAtariSampler(factory, 8, 2, seed=1) as sampler:
        sampler.initialize(agent)
        sampler.obtain_samples(0)
        state = sampler.state_dict()
        with pytest.warns(UserWarning, match="restarts every game"):
            sampler.load_state_dict(state)
        samples, _ = sampler.obtain_samples(1)
        assert samples.observation.shape == (8, 2, 4, 84, 84)


@pytest.mark.parametrize("kind, shape", [("uniform", ()), ("normal", (3,))])
def test_noise_drawn_per_batch_equals_noise_drawn_per_step(kind, shape):
    from rlfw.samplers.machinery.noise import SlotNoise

    per_step, per_batch = (SlotNoise(7, 1, [2, 5, 9], shape, kind) for _ in range(2))
    steps = np.stack([per_step.draw() for _ in range(16)])
    batch = per_batch.draw_batch(16)
    assert batch.dtype == np.float32 and batch.shape == (16, 3) + shape
    assert np.array_equal(steps, batch)
    assert per_step.state() == per_batch.state()  # checkpoints see the same streams


def test_held_noise_repeats_each_draw_and_resumes_mid_hold_through_a_checkpoint(tmp_path):
    """``hold=3``: step i gets fresh draw i // 3 of the plain stream, whether drawn per step
    or per batch; a stream saved mid-hold (through a real checkpoint file) and restored
    goes on with the same numbers."""
    from rlfw.runfolder.checkpoint import load_checkpoint, save_checkpoint
    from rlfw.samplers.machinery.noise import SlotNoise

    plain = SlotNoise(7, 1, [2, 5], (2,), "normal").draw_batch(4)
    held = SlotNoise(7, 1, [2, 5], (2,), "normal", hold=3)
    per_step = SlotNoise(7, 1, [2, 5], (2,), "normal", hold=3)
    first = held.draw_batch(5)  # stops inside the second draw's hold
    steps = np.stack([per_step.draw() for _ in range(5)])
    assert np.array_equal(first, steps)
    assert np.array_equal(first, plain[[0, 0, 0, 1, 1]])
    path = save_checkpoint(str(tmp_path), 5, {"noise": held.state()})
    resumed = SlotNoise(7, 1, [2, 5], (2,), "normal", hold=3)
    resumed.set_state(load_checkpoint(path)["noise"])
    rest = held.draw_batch(6)
    assert np.array_equal(rest, plain[[1, 2, 2, 2, 3, 3]])
    assert np.array_equal(resumed.draw_batch(6), rest)
    with pytest.raises(ValueError, match="held draws does not fit a stream with hold=1"):
        SlotNoise(7, 1, [2, 5], (2,), "normal").set_state(held.state())
    with pytest.raises(ValueError, match=r"noise hold must be an int >= 1 .* got 0"):
        SlotNoise(7, 1, [2, 5], (2,), "normal", hold=0)


def test_an_unknown_start_method_is_named_with_the_choices():
    from rlfw.samplers import ParallelCpuSampler
    from rlfw.testing import CountingAgent, CountingEnv

    sampler = ParallelCpuSampler(
        EnvFactory("c", entry=CountingEnv), 4, 2, n_workers=1, start_method="thread"
    )
    with pytest.raises(
        ValueError,
        match=r"start method 'thread' unknown; choose from "
        r"\[.*'forkserver'.*\]",
    ):
        sampler.initialize(CountingAgent())
    sampler.close()


def test_the_run_s_start_method_starts_evaluation_workers_and_the_async_sampler_process():
    """``start_method`` is every process a run starts: a sampler's workers, evaluation
    workers (any sampler kind) and the async runner's sampler process; a run that starts
    none refuses the setting (tests/test_cli.py)."""
    from rlfw.launch.build import build_runner
    from rlfw.launch.config import RunConfig

    config = RunConfig.for_env(
        "CartPole-v1", "ppo", steps=512, runner="async", n_eval_workers=1, start_method="spawn"
    )
    with build_runner(config, None, progress=False, stdout=False) as runner:
        assert runner.sampler.start_method == "spawn"  # the async runner's sampler process
        serial = runner.sampler.sampler
        serial.initialize(runner.agent)
        assert len(serial.evaluate(1)) == 1
        assert serial.evaluations()._evaluator.group.pool.ctx.get_start_method() == "spawn"


@pytest.mark.parametrize("kind", list(PARALLEL))
def test_nested_observations_equal_the_serial_samplers_exactly(kind):
    """A Dict observation (nested Tuple, Discrete, MultiDiscrete, MultiBinary, uint8 and
    bool leaves) lands in the buffer leaf by leaf, each with its dtype, bit for bit as
    the serial sampler writes it, bootstrap values of truncated episodes included."""
    factory = EnvFactory("nested-counting", entry=NestedCountingEnv)
    with SerialSampler(factory, 7, 5, seed=11, debug=True) as reference:
        expected = collect(reference, CountingAgent(), 3)
    with ALL[kind](factory, 7, 5, 11) as sampler:
        got = collect(sampler, CountingAgent(), 3)
    for (exp_samples, exp_eps), (got_samples, got_eps) in zip(expected, got):
        assert trees_equal(exp_samples, got_samples)
        assert exp_eps == got_eps
    obs = expected[0][0].observation
    dtypes = {path: leaf.dtype for path, leaf in tree_paths(obs)}
    assert dtypes == {
        "count": torch.float32,
        "flags": torch.int8,
        "grid": torch.uint8,
        "pair.0": torch.int64,
        "pair.1": torch.bool,
        "step": torch.int64,
    }
    t = obs["count"][..., 2]
    assert torch.equal(obs["step"], t.long() % 7)
    assert torch.equal(obs["grid"], t.to(torch.uint8)[..., None, None, None].expand(7, 5, 2, 3, 3))
    assert torch.equal(obs["pair"][1][..., 0], t.long() % 2 == 0)
    assert sum(s.bootstrap_value.abs().sum() for s, _ in expected) > 0
