"""Videos of the agent (``rlfw eval RUN --video``, ``--video-every``) and W&B logging: a
CartPole video holds one frame per step plus the reset frame, Atari's is the full-colour
screen, and an offline W&B run holds exactly the scalars progress.csv holds."""

import csv
import glob
import json
import re
import struct
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pytest

from rlfw.cli import main
from rlfw.envs import EnvSpaces
from rlfw.launch.build import build_agent
from rlfw.launch.config import RunConfig
from rlfw.samplers.machinery.evaluation import EvalLimits
from rlfw.samplers.machinery.video import record_episodes

RUN = [
    "train",
    "--steps",
    "1024",
    "--eval-every",
    "512",
    "--eval-episodes",
    "2",
    "--checkpoint-every",
    "512",
    "--no-progress",
]


def frames(path) -> list[np.ndarray]:
    return list(iio.imiter(path))


def test_a_cartpole_video_has_a_frame_per_step_and_the_reset_frame(tmp_path):
    config = RunConfig.for_env("CartPole-v1")
    factory = config.env_factory()
    agent = build_agent(config, EnvSpaces.of(factory))
    returns, written = record_episodes(agent, factory, str(tmp_path), 3, greedy=True, seed=5)
    assert len(written) == 3 and [len(files) for files in written] == [2, 1, 1]  # 1 GIF
    for ret, files in zip(returns, written):
        mp4 = files[0]
        assert mp4.endswith(f"-return-{ret:.1f}.mp4")
        video = frames(mp4)
        assert len(video) == int(ret) + 1  # CartPole: return == steps
        assert video[0].shape == (400, 600, 3)
    assert written[0][1].endswith(".gif") and len(iio.imread(written[0][1], index=None)) > 1
    assert not glob.glob(str(tmp_path / ".tmp-*"))  # no half-written video left


def test_atari_video_is_the_full_colour_screen_and_a_cut_episode_is_kept(tmp_path):
    from rlfw.agents.random_agent import RandomAgent

    config = RunConfig.for_env("ALE/Pong-v5", algo="ppo")
    factory = config.env_factory()
    agent = RandomAgent(EnvSpaces.of(factory).action)
    _, written = record_episodes(
        agent,
        factory,
        str(tmp_path),
        1,
        greedy=False,
        seed=0,
        limits=EvalLimits(max_episode_steps=30),
    )
    ((mp4, gif),) = written
    assert re.search(r"episode-00-return--?\d+\.\d-cut\.mp4$", mp4)
    video = frames(mp4)
    assert len(video) == 31 and video[0].shape == (210, 160, 3)  # not the 84x84 gray input
    assert np.ptp(video[-1].astype(int), axis=2).max() > 50  # colour


def test_eval_video_cli_writes_under_the_run_folder(tmp_path, capsys):
    run = tmp_path / "run"
    assert main([*RUN, "--log-dir", str(run)]) == 0
    assert main(["eval", str(run), "--episodes", "2", "--video"]) == 0
    out = capsys.readouterr().out
    assert f"videos of 2 episode(s) in {run / 'videos'}" in out
    names = sorted(p.name for p in (run / "videos").iterdir())
    assert len([n for n in names if n.endswith(".mp4")]) == 2
    mean = float(re.search(r"mean return ([\d.]+)", out).group(1))
    shown = [
        float(re.search(r"return-([\d.]+)\.mp4", n).group(1)) for n in names if n.endswith(".mp4")
    ]
    assert np.mean(shown) == pytest.approx(mean)


def wandb_records(path: str):
    """The protobuf records of a ``.wandb`` transaction log (LevelDB log format: a 7-byte
    header, then 32 KiB blocks of chunks, each with a CRC, length and FULL/FIRST/MIDDLE/
    LAST type). wandb 0.31 has no Python reader of its own files, hence this."""
    from wandb.proto import wandb_internal_pb2

    data, pos, block, chunks = Path(path).read_bytes(), 7, 32768, b""
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:
            pos += left
            continue
        _, length, kind = struct.unpack_from("<IHB", data, pos)
        chunks += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # FULL or LAST: a whole record
            record = wandb_internal_pb2.Record()
            record.ParseFromString(chunks)
            yield record
            chunks = b""


def test_offline_wandb_run_logs_what_progress_csv_holds(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    run = tmp_path / "run"
    assert (
        main(
            [
                *RUN,
                "--log-dir",
                str(run),
                "--wandb",
                "--video-every",
                "1024",
                "--set",
                "wandb.group=suite-x",
            ]
        )
        == 0
    )
    (log,) = glob.glob(str(run / "wandb" / "offline-run-*" / "run-*.wandb"))
    history, config, group = {}, {}, None
    for record in wandb_records(log):
        kind = record.WhichOneof("record_type")
        if kind == "history":
            row = {
                item.key or "/".join(item.nested_key): json.loads(item.value_json)
                for item in record.history.item
            }
            history.setdefault(record.history.step.num, {}).update(row)
        elif kind == "run":
            group = record.run.run_group
            config = {item.key: json.loads(item.value_json) for item in record.run.config.update}
    with open(run / "progress.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) >= 2 and int(rows[-1]["step"]) == 1024
    for row in rows:
        logged = history[int(row["step"])]
        for key, value in row.items():
            if key != "step" and value != "":
                assert logged[key] == pytest.approx(float(value), rel=1e-12, nan_ok=True), key
    assert history[1024]["eval/video/_type"] == "video-file"  # nested keys come flattened
    assert config["algo"] == "ppo" and config["env"] == "CartPole-v1" and group == "suite-x"


def test_an_async_run_records_its_videos(tmp_path):
    """The async runner's sampler lives in another process; a video replays one
    evaluation episode in this one, from the wrapped sampler's env and seed."""
    run = tmp_path / "run"
    argv = [*RUN, "--runner", "async", "--video-every", "512", "--log-dir", str(run)]
    assert main(argv) == 0
    assert len(glob.glob(str(run / "videos" / "step-*.mp4"))) == 2
