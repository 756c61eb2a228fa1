"""Packaging for rlfw. Install torch==2.13.0 first (see README): a looser torch
requirement here would let pip pull a multi-GB CUDA build on CPU-only machines."""

from setuptools import find_packages, setup

extras = {
    "tb": ["tensorboard"],
    "plot": ["matplotlib"],
    # benchmark peers (rl-zoo3 holds the tuned settings `rlfw benchmark --peer sb3` reads)
    # and rliable's IQM + bootstrap CIs; its arch dependency breaks on pandas 3.
    "bench": ["stable-baselines3>=2.3", "sb3-contrib>=2.3", "rl_zoo3>=2.3", "rliable", "pandas<3"],
    # gymnasium's MuJoCo envs (HalfCheetah-v5, Hopper-v5, ...)
    "mujoco": ["gymnasium[mujoco]"],
    # gymnasium-robotics' goal-conditioned envs (FetchReach-v4, ...) for SAC/TD3/DDPG + HER;
    # its Fetch tasks fail an assertion in set_joint_qpos with mujoco 4.0.1, so pin one
    # that works (gymnasium's MuJoCo v5 envs run on it too)
    "robotics": ["gymnasium-robotics==1.4.2", "mujoco==3.3.7"],
    # gymnasium's Box2D envs (LunarLander-v3, BipedalWalker-v3, CarRacing-v3): a wheel
    "box2d": ["gymnasium[box2d]"],
    # MinAtar's five 10x10 games as MinAtar/<Game>-v1 (rlfw registers them)
    "minatar": ["minatar>=1.0.15"],
    # MiniGrid's gridworlds under their own ids (MiniGrid-DoorKey-5x5-v0, ...)
    "minigrid": ["minigrid>=3.0"],
    # PettingZoo's classic board games (connect four) as single-agent envs, and PettingZoo
    # Parallel envs (MPE's: mpe2.simple_spread_v3) with each agent a column of the batch
    "pettingzoo": ["pettingzoo>=1.24", "mpe2>=1.1"],
    # sweeps as Ray tasks on a cluster (rlfw sweep --backend ray)
    "ray": ["ray>=2.9"],
    # `rlfw eval RUN --video`, `--video-every`: mp4/GIF encoding (imageio's ffmpeg plugin
    # ships an ffmpeg binary) and pygame, which classic control renders with
    "video": ["imageio>=2.31", "imageio-ffmpeg", "gymnasium[classic-control]"],
    # `rlfw export RUN OUT --onnx`: the policy as ONNX (torch's TorchScript-based exporter
    # writes through onnx; onnxruntime checks it against the agent at export)
    "onnx": ["onnx>=1.17", "onnxruntime>=1.20"],
    # `rlfw tune`: Optuna's TPE sampler, pruners and study storage (SQLite by default)
    "tune": ["optuna>=3.5"],
    # `--wandb`: Weights & Biases (works offline: WANDB_MODE=offline)
    "wandb": ["wandb>=0.17"],
    # the manual (`make docs`: mkdocs with the material theme, the API from docstrings)
    "docs": ["mkdocs>=1.6", "mkdocs-material>=9.5", "mkdocstrings[python]>=0.26"],
    # the suite, its two workers (pytest-xdist), its linter and type checker (rules in
    # pyproject.toml)
    "test": ["pytest", "pytest-xdist", "ruff", "mypy"],
}
extras["all"] = sorted({req for reqs in extras.values() for req in reqs})

setup(
    name="rlfw",
    version="0.1.0",
    description="Modular deep RL: interchangeable samplers, one [T,B] buffer, fourteen "
    "algorithms (PPO, A2C, APPO, IMPALA, IPPO, MAPPO, DQN, C51, Rainbow, R2D1, PQN, SAC, "
    "TD3, DDPG), sync/concurrent/"
    "async/multi-process runners, run folders that are safe to share.",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    packages=find_packages(include=["rlfw", "rlfw.*"]),
    package_data={"rlfw": ["py.typed"]},  # PEP 561: type checkers read rlfw's annotations
    python_requires=">=3.10",
    install_requires=[
        "torch>=2.1",
        "gymnasium>=1.1",
        "ale-py>=0.11",
        "numpy",
        "psutil",
        "tqdm",
        # exported policies (`rlfw export`): weights only, read without running code
        "safetensors",
        # gymnasium's AtariPreprocessing resizes frames with OpenCV (headless: no GUI libs).
        "opencv-python-headless",
        # TypeVar defaults (the generic DqnAgent) on Python < 3.13; torch requires it too
        "typing-extensions>=4.10",
    ],
    extras_require=extras,
    entry_points={"console_scripts": ["rlfw=rlfw.cli:main"]},
)
