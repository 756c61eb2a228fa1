"""R2D1: sequence replay (stored states, episode starts, priorities), the value rescaling,
burn-in without loss, n-step targets against a loop, and runs from the CLI."""

import json

import numpy as np
import pytest
import torch

from rlfw.agents.dqn_agent import RecurrentDqnAgent
from rlfw.algos.dqn.r2d1 import R2D1, R2D1Config, rescale, unrescale
from rlfw.buffers import AgentInfo, Samples
from rlfw.buffers.replay import RowStorage
from rlfw.buffers.replay.sequence import SequenceReplay
from rlfw.buffers.replay.storage import FrameStorage
from rlfw.cli import main
from rlfw.envs import EnvFactory, EnvSpaces


def batch_of(T, B, start, dones=(), state_size=4):
    """Rows numbered from ``start``: obs = [row, col], state = row * 100 + col per unit."""
    row = torch.arange(start, start + T, dtype=torch.float32)[:, None].expand(T, B)
    col = torch.arange(B, dtype=torch.float32)[None, :].expand(T, B)
    terminated = torch.zeros(T, B, dtype=torch.bool)
    for t, b in dones:
        terminated[t - start, b] = True
    state = (row * 100 + col).unsqueeze(-1).expand(T, B, state_size).clone()
    return Samples(
        torch.stack([row, col], -1),
        (row % 2).long(),
        torch.ones(T, B),
        terminated,
        torch.zeros(T, B, dtype=torch.bool),
        AgentInfo(torch.zeros(T, B), torch.zeros(T, B)),
        torch.zeros(T, B),
        agent_state=state,
    )


def replay(T=24, B=2, length=6, period=3, alpha=0.0):
    storage = RowStorage(T * B, B, (2,), np.float32, (), np.int64)
    return SequenceReplay(storage, 4, length, period, alpha=alpha, seed=0)


def test_sequences_carry_the_sampler_s_state_at_their_first_row_and_every_episode_start():
    r = replay()
    r.append_samples(batch_of(10, 2, 0, dones=[(4, 1)]))
    # complete sequences: starts 0 and 3 (rows 0-5, 3-8), both columns
    assert len(r) == 4
    batch = r.batch(np.array([0, 1, 2, 3]))  # (start 0, col 0), (0, 1), (3, 0), (3, 1)
    assert (
        batch.observation[:, :, 0].T.tolist() == [[0, 1, 2, 3, 4, 5]] * 2 + [[3, 4, 5, 6, 7, 8]] * 2
    )
    assert batch.initial_state[:, 0].tolist() == [0.0, 1.0, 300.0, 301.0]
    # column 1 ended an episode at row 4: row 5 starts the next, and the learner resets
    assert batch.episode_start[:, 1].tolist() == [False] * 5 + [True]
    assert batch.episode_start[:, 3].tolist() == [False, False, True, False, False, False]
    assert not batch.episode_start[:, [0, 2]].any()


def test_frame_stacks_of_the_first_rows_repeat_the_reset_frame_under_sequence_replay():
    """Frame-deduplicated storage (Atari) rebuilds each stack from the frames stored and
    the episode starts: the rows after a reset repeat its frame, under sequence replay as
    alone (the sequence writer keeps the storage's episode starts)."""
    T, S = 8, 4
    obs = torch.zeros(T, 1, S, 2, 2, dtype=torch.uint8)
    for t in range(T):  # frame t + 1 at step t; before the episode, the reset frame again
        obs[t, 0] = torch.tensor([max(t - k, 0) + 1 for k in range(S - 1, -1, -1)])[:, None, None]
    zeros = torch.zeros(T, 1)
    samples = Samples(
        obs,
        torch.zeros(T, 1, dtype=torch.long),
        zeros,
        zeros.bool(),
        zeros.bool(),
        AgentInfo(zeros, zeros),
        zeros,
        agent_state=torch.zeros(T, 1, 3),
    )
    storage = FrameStorage(64, 1, (S, 2, 2), np.uint8, (), np.int64)
    SequenceReplay(storage, 3, length=4, period=2).append_samples(samples)
    rebuilt = storage.observations(np.arange(T), np.zeros(T, np.int64))
    assert np.array_equal(rebuilt, obs[:, 0].numpy())


def test_overwritten_sequences_are_never_drawn_and_new_ones_are():
    r = replay(T=12, length=6, period=3)
    r.append_samples(batch_of(12, 2, 0))
    r.append_samples(batch_of(6, 2, 12))  # rows 0-5 of the ring now hold rows 12-17
    starts = {int(s) for s in r.sample(500).observation[0, :, 0]}
    assert starts == {6, 9, 12}  # 0 and 3 were overwritten; 12 is complete (12-17)


def test_priorities_follow_the_learner_and_weights_correct_them():
    r = replay(alpha=1.0)
    r.append_samples(batch_of(12, 2, 0))
    ids = np.arange(r.slots * 2)
    held = r.tree.get(ids) > 0
    r.update_priorities(ids[held], np.where(ids[held] == 2, 9.0, 1.0))
    drawn = r.sample(3000)
    share = np.mean(drawn.index == 2)
    assert share == pytest.approx(9 / (9 + held.sum() - 1), abs=0.03)
    w = drawn.weight.numpy()
    assert w[drawn.index == 2].max() < w[drawn.index != 2].min()


def test_value_rescaling_is_inverted_exactly():
    x = torch.linspace(-500, 500, 1001, dtype=torch.float64)
    assert torch.allclose(unrescale(rescale(x)), x, atol=1e-9)
    assert rescale(torch.tensor([0.0])).item() == 0.0


def make_algo(**changes):
    config = R2D1Config(
        burn_in=2,
        learn_steps=3,
        period=3,
        n_step=2,
        gamma=0.9,
        batch_size=4,
        replay_capacity=64,
        **changes,
    )
    spaces = EnvSpaces.of(EnvFactory("rlfw/CartPoleNoVel-v1"))
    torch.manual_seed(0)
    agent = RecurrentDqnAgent.build_recurrent(spaces, 2, rnn_size=8, hidden=(8,))
    algo = R2D1(config)
    algo.initialize(agent, n_itr=10)
    return algo


def sequence(length=7, n=4, seed=0):
    gen = torch.Generator().manual_seed(seed)
    from rlfw.buffers.replay.sequence import SequenceBatch

    term = torch.zeros(length, n, dtype=torch.bool)
    term[3, 1] = True  # an episode end inside the learned steps
    trunc = torch.zeros(length, n, dtype=torch.bool)
    trunc[4, 2] = True
    start = torch.zeros(length, n, dtype=torch.bool)
    start[4, 1] = start[5, 2] = True
    return SequenceBatch(
        torch.randn(length, n, 2, generator=gen),
        torch.randint(0, 2, (length, n), generator=gen),
        torch.rand(length, n, generator=gen),
        term,
        trunc,
        torch.rand(length, n, generator=gen) * 3,
        start,
        torch.randn(n, 16, generator=gen) * 0.1,
        torch.ones(n),
        np.arange(n),
    )


def test_burn_in_steps_carry_no_loss():
    algo = make_algo()
    batch = sequence()
    loss, _, _ = algo._sequence_losses(batch)
    changed = batch._replace(action=batch.action.clone(), reward=batch.reward.clone())
    changed.action[:2] = 1 - changed.action[:2]
    changed.reward[:2] += 100.0
    again, _, _ = algo._sequence_losses(changed)
    assert torch.equal(loss, again)


def test_targets_equal_a_per_step_loop_and_priorities_their_definition():
    algo = make_algo()
    c = algo.config
    batch = sequence()
    burn, learn, n = c.burn_in, c.learn_steps, c.n_step
    with torch.no_grad():
        _, s_on = algo.agent.q.sequence_and_state(
            batch.observation[:burn], batch.initial_state, batch.episode_start[:burn]
        )
        _, s_tg = algo.target.sequence_and_state(
            batch.observation[:burn], batch.initial_state, batch.episode_start[:burn]
        )
        q = algo.agent.q.forward_sequence(
            batch.observation[burn:], s_on, batch.episode_start[burn:]
        )
        tq = algo.target.forward_sequence(
            batch.observation[burn:], s_tg, batch.episode_start[burn:]
        )
        got = algo._targets(batch, q, tq)
    for t in range(learn):
        for j in range(batch.action.shape[1]):
            ret, disc, y = 0.0, 1.0, None
            for k in range(n):
                row = burn + t + k
                ret += disc * float(batch.reward[row, j])
                disc *= c.gamma
                if batch.terminated[row, j]:
                    y = ret
                    break
                if batch.truncated[row, j]:
                    y = ret + disc * float(unrescale(batch.bootstrap_value[row, j].double()))
                    break
            if y is None:
                a = int(q[t + n, j].argmax())
                y = ret + disc * float(unrescale(tq[t + n, j, a].double()))
            assert float(got[t, j]) == pytest.approx(
                float(rescale(torch.tensor(y))), rel=1e-5, abs=1e-6
            )
    _, q_taken, priority = algo._sequence_losses(batch)
    td = (q_taken - got).abs()
    expected = c.eta * td.max(0).values + (1 - c.eta) * td.mean(0)
    assert torch.allclose(priority, expected, atol=1e-6)


@pytest.mark.parametrize("sampler", ["serial", "cpu"])
@pytest.mark.integration
def test_r2d1_trains_resumes_and_evaluates_from_the_cli(tmp_path, capsys, sampler):
    run = tmp_path / "run"
    flags = [
        "--algo",
        "r2d1",
        "--env",
        "rlfw/CartPoleNoVel-v1",
        "--sampler",
        sampler,
        "--set",
        "r2d1.learning_starts=640",
        "--eval-every",
        "640",
        "--eval-episodes",
        "2",
        "--checkpoint-every",
        "640",
        "--no-progress",
    ]
    if sampler == "cpu":
        flags += ["--n-workers", "2"]
    assert main(["train", *flags, "--steps", "1280", "--log-dir", str(run)]) == 0, (
        capsys.readouterr().err
    )
    saved = json.loads((run / "config.json").read_text())
    assert saved["algo"] == "r2d1" and saved["r2d1"]["burn_in"] == 10
    assert main(["train", "--resume", str(run), "--steps", "1920", "--no-progress"]) == 0
    assert main(["eval", str(run), "--episodes", "2"]) == 0
    assert "mean return" in capsys.readouterr().out


@pytest.mark.integration
def test_async_r2d1_repeats_bitwise_whatever_the_timing(tmp_path):
    """The sampler process writes sequences with their states into the shared storage;
    the learner reveals them batch by batch: held back or not, the same run."""
    import time

    from rlfw.launch.build import build_runner

    from conftest import bits

    def run(name, delay_s):
        config = r2d1_config(8)
        config.runner = "async"
        runner = build_runner(config, str(tmp_path / name), progress=False, stdout=False)
        learn = runner._update

        def slow_update(samples, itr):
            if itr % 3 == 1:
                time.sleep(delay_s)
            return learn(samples, itr)

        runner._update = slow_update
        with runner:
            runner.train()
        assert runner.algo.updates > 0
        return runner.agent.state_dict()

    fast, slow = run("fast", 0.0), run("slow", 0.3)
    assert all(torch.equal(bits(fast[k]), bits(slow[k])) for k in fast)


def r2d1_config(itrs: int):
    from rlfw.launch.config import RunConfig
    from rlfw.runners import RunSchedule

    config = RunConfig.for_env("rlfw/CartPoleNoVel-v1", "r2d1", batch_B=4, batch_T=40)
    config.r2d1 = R2D1Config(
        **{
            **config.r2d1.__dict__,
            "learning_starts": 320,
            "save_replay": True,
            "prioritized": True,
            "replay_capacity": 4_000,
            "target_update_interval": 320,
        }
    )
    config.schedule = RunSchedule(
        n_steps=itrs * 160, eval_every=None, log_every=160, checkpoint_every=320, keep_checkpoints=3
    )
    return config


@pytest.mark.integration
def test_resume_with_the_saved_sequence_replay_is_bitwise_identical(tmp_path, monkeypatch):
    from rlfw.launch.build import build_runner

    from conftest import bits

    whole = build_runner(r2d1_config(8), str(tmp_path / "a"), progress=False, stdout=False)
    with whole:
        whole.train()
    part = build_runner(r2d1_config(8), str(tmp_path / "b"), progress=False, stdout=False)
    real = type(part.sampler).obtain_samples

    def interrupt(self, itr):
        if itr == 6:
            raise KeyboardInterrupt
        return real(self, itr)

    monkeypatch.setattr(type(part.sampler), "obtain_samples", interrupt)
    with part:
        assert part.train().interrupted
    monkeypatch.setattr(type(part.sampler), "obtain_samples", real)
    resumed = build_runner(
        r2d1_config(8), str(tmp_path / "b"), resume=True, progress=False, stdout=False
    )
    with resumed:
        resumed.train()
    assert whole.algo.updates == resumed.algo.updates > 0
    a, b = whole.agent.state_dict(), resumed.agent.state_dict()
    assert all(torch.equal(bits(a[k]), bits(b[k])) for k in a)


def _novel_final_return(algo: str, seed: int, steps: int) -> float:
    """The end-of-run greedy evaluation (20 episodes) of ``rlfw train --algo <algo> --env
    rlfw/CartPoleNoVel-v1 --steps <steps> --seed <seed>``."""
    from rlfw.launch.build import build_runner
    from rlfw.launch.config import RunConfig

    config = RunConfig.for_env("rlfw/CartPoleNoVel-v1", algo, seed=seed)
    config.schedule.n_steps, config.schedule.eval_every = steps, 10**9
    config.schedule.eval_episodes = 20
    with build_runner(config, None, progress=False, stdout=False) as runner:
        result = runner.train()
    assert len(result.eval_history) == 1  # the end-of-run evaluation only
    return result.eval_return


@pytest.mark.slow
def test_r2d1_final_policy_learns_cartpole_without_velocities():
    """``rlfw train --algo r2d1 --env rlfw/CartPoleNoVel-v1 --steps 35000``, seed 0: the
    final policy holds >= 150 over 20 episodes (measured: 311; 114 at 30k, 349 at 40k; at
    60k 238 here, 256 on
    another host; at the preset's 120k steps seeds 0, 1, 2 end at 500, 500, 500), where
    feed-forward DQN with 200k steps ended at 24, 23 and 34 (positions alone cannot tell
    which way the pole falls; docs/dqn.md). A check of the mechanism at a third of the
    preset's budget: the seeds' statistics belong to the benchmark suites."""
    final = _novel_final_return("r2d1", seed=0, steps=35_000)
    assert final >= 150, final
