"""``rlfw export RUN OUT``: a trained agent as a folder to hand on or upload to the Hugging
Face Hub as is — ``model.safetensors`` (the weights alone), ``config.json`` (the run's),
``README.md`` (a model card: env, algorithm, evaluation, the training command, the rlfw
version) and ``replay.gif`` when the ``[video]`` extra is installed. ``rlfw eval OUT``
plays it and gets the numbers ``rlfw eval RUN`` gets with the same seed."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version

import numpy as np

from rlfw.launch.config import RunConfig, train_command
from rlfw.launch.evaluate import evaluate_checkpoint, load_for_evaluation
from rlfw.launch.onnx_export import ONNX_FILE, STATE, OnnxCheck, export_onnx, onnx_runtime
from rlfw.runfolder.files import write_json, write_text
from rlfw.runfolder.policy_folder import WEIGHTS, save_policy_weights

GIF = "replay.gif"


@dataclass
class Exported:
    """What ``export_policy`` wrote: the folder, its checkpoint source and evaluation."""

    out: str
    source: str
    returns: np.ndarray
    gif: bool
    onnx: OnnxCheck | None = None


def rlfw_version() -> str:
    try:
        return version("rlfw")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def check_export_target(out: str) -> None:
    """``ValueError`` unless ``out`` is new or an empty folder: an export never mixes its
    files with others or replaces a folder's contents."""
    if os.path.exists(out) and (not os.path.isdir(out) or os.listdir(out)):
        what = "a file" if not os.path.isdir(out) else "a folder that is not empty"
        raise ValueError(f"export target {out!r} is {what}; name a new or empty folder")


def export_policy(
    run_dir: str,
    out: str,
    config: RunConfig,
    best: bool = False,
    trust: bool = False,
    episodes: int = 10,
    seed: int = 12345,
    gif: bool = True,
    onnx: bool = False,
) -> Exported:
    """Write the policy folder ``out`` from the run's newest checkpoint that loads
    (``best``: ``checkpoints/best.pt``), evaluated over ``episodes`` with ``seed`` as
    ``rlfw eval`` would. ``config`` is the run's, its plugins checked by the caller.
    Everything is written in a temp folder beside ``out`` and renamed at the end, so a
    failure leaves nothing half-written."""
    check_export_target(out)
    if onnx:
        onnx_runtime()  # the install hint before anything is read or played
    source, state = load_for_evaluation(run_dir, best, trust)
    parent = os.path.dirname(os.path.abspath(out))
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f".{os.path.basename(os.path.abspath(out))}-", dir=parent)
    try:
        save_policy_weights(
            os.path.join(staging, WEIGHTS),
            state["agent"],
            {"algo": config.algo, "env": config.env, "rlfw_version": rlfw_version()},
        )
        write_json(os.path.join(staging, "config.json"), config.to_dict())
        returns = evaluate_checkpoint(staging, episodes, seed=seed, config=config)
        made_gif = gif and _write_gif(staging, config, seed)
        checked = _write_onnx(staging, config, seed) if onnx else None
        write_text(
            os.path.join(staging, "README.md"),
            model_card(config, returns, seed, source, made_gif, checked),
        )
        _readable_by_all(staging)
        if os.path.isdir(out):
            os.rmdir(out)  # empty, as checked
        os.replace(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return Exported(out, source, returns, made_gif, checked)


def _readable_by_all(folder: str) -> None:
    """The modes a folder made by hand would have (mkdtemp's are private to the user)."""
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(folder, 0o777 & ~mask)
    for name in os.listdir(folder):
        os.chmod(os.path.join(folder, name), 0o666 & ~mask)


def _write_gif(folder: str, config: RunConfig, seed: int) -> bool:
    """One evaluation episode as ``replay.gif`` (False when the [video] extra is missing)."""
    try:
        from rlfw.logging.video import imageio_module

        imageio_module()
    except ValueError:
        return False
    from rlfw.envs import EnvSpaces
    from rlfw.launch.build import build_agent
    from rlfw.runfolder.policy_folder import load_policy_weights
    from rlfw.samplers.machinery.video import record_episodes

    env_factory = config.env_factory().resolved()
    agent = build_agent(config, EnvSpaces.of(env_factory))
    agent.load_state_dict(load_policy_weights(folder))
    with tempfile.TemporaryDirectory(dir=folder) as videos:
        _, written = record_episodes(
            agent,
            env_factory,
            videos,
            1,
            config.schedule.eval_greedy,
            seed,
            config.schedule.eval_limits(),
        )
        gifs = [f for f in written[0] if f.endswith(".gif")]
        if not gifs:
            return False
        shutil.move(gifs[0], os.path.join(folder, GIF))
    return True


# Real observations the exported graph is checked on: the policy's own greedy steps (a
# thousand: a second or two of the policy's own play, long enough to leave the start states).
ONNX_CHECK_ROWS = 1000


def _write_onnx(folder: str, config: RunConfig, seed: int) -> OnnxCheck:
    """``policy.onnx`` from the folder's weights, checked on the observations of
    ``ONNX_CHECK_ROWS`` greedy steps of the policy in an evaluation env."""
    from rlfw.buffers.tree import tree_stack
    from rlfw.envs import EnvSpaces
    from rlfw.launch.build import build_agent
    from rlfw.runfolder.policy_folder import load_policy_weights

    env_factory = config.env_factory().resolved()
    agent = build_agent(config, EnvSpaces.of(env_factory))
    agent.load_state_dict(load_policy_weights(folder))
    agent.eval_mode()
    env = env_factory(False)
    try:
        obs, _ = env.reset(seed=seed)
        rows, state = [obs], agent.initial_state(1)
        noise = np.zeros((1, *agent.noise_shape), np.float32)
        while len(rows) < ONNX_CHECK_ROWS:
            step = agent.step(tree_stack([obs]), noise, None, state)
            state = step.state
            obs, _, terminated, truncated, _ = env.step(agent.env_action(step.action)[0])
            if terminated or truncated:
                obs, _ = env.reset()
                state = agent.initial_state(1)
            rows.append(obs)
    finally:
        env.close()
    return export_onnx(agent, tree_stack(rows), os.path.join(folder, ONNX_FILE))


def _onnx_section(check: OnnxCheck) -> list[str]:
    """How to run ``policy.onnx``, for the model card."""
    feeds = ", ".join(
        f'"{name}": zeros((1, STATE_SIZE), float32)' if name == STATE else f'"{name}": ...'
        for name in check.inputs
    )
    return [
        f"## {ONNX_FILE}",
        "",
        f"The deterministic policy for onnxruntime (no torch needed): inputs "
        f"{', '.join(f'`{n}`' for n in check.inputs)} (each with a leading batch dimension), "
        f"outputs {', '.join(f'`{n}`' for n in check.outputs)}; checked at export against the "
        f"agent on {check.rows} real observations (largest difference "
        f"{check.max_difference:.2g}). The action is the agent's own: a Discrete one counts "
        "from 0 (add the space's start), a PPO/A2C Box action is clipped to the space's bounds "
        "before the env takes it, and SAC's, TD3's and DDPG's lie in [-1, 1] and map to "
        "low + (a + 1) (high - low) / 2.",
        "",
        "```python",
        "import onnxruntime",
        "from numpy import float32, zeros",
        "",
        f'session = onnxruntime.InferenceSession("{ONNX_FILE}")',
        f"outputs = session.run(None, {{{feeds}}})",
        "action = outputs[0]",
        "```",
        "",
    ]


def model_card(
    config: RunConfig,
    returns: np.ndarray,
    seed: int,
    source: str,
    gif: bool,
    onnx: OnnxCheck | None = None,
) -> str:
    """The folder's README.md: Hugging Face model-card front matter, then the facts."""
    name = f"{config.algo}-{config.env.replace('/', '-')}"
    score = f"{returns.mean():.2f} +/- {returns.std():.2f}"
    mode = "greedy" if config.schedule.eval_greedy else "sampled"
    lines = [
        "---",
        "library_name: rlfw",
        "tags:",
        "- reinforcement-learning",
        "- deep-reinforcement-learning",
        f"- {config.env}",
        f"- {config.algo}",
        "model-index:",
        f"- name: {name}",
        "  results:",
        "  - task:",
        "      type: reinforcement-learning",
        "      name: reinforcement-learning",
        "    dataset:",
        f"      name: {config.env}",
        f"      type: {config.env}",
        "    metrics:",
        "    - type: mean_reward",
        f"      value: {score}",
        "      name: mean_reward",
        "---",
        "",
        f"# {config.algo} on {config.env} (rlfw)",
        "",
        *([f"![replay]({GIF})", ""] if gif else []),
        f"- **Evaluation**: mean return {returns.mean():.2f} ± {returns.std():.2f} over "
        f"{len(returns)} episodes ({mode} actions, evaluation seed {seed}).",
        f"- **Training**: {config.schedule.n_steps:,} env steps, seed {config.seed}, sampler "
        f"`{config.sampler}`, runner `{config.runner}`; `config.json` holds every setting.",
        f"- **Weights**: `{WEIGHTS}` from checkpoint `{os.path.basename(source)}`; tensors "
        "only, so loading it runs no code.",
        f"- **rlfw version**: {rlfw_version()}.",
        "",
        "Play it again (the same numbers with the same seed):",
        "",
        "```bash",
        f"rlfw eval THIS_FOLDER --episodes {len(returns)} --seed {seed}",
        "```",
        "",
        "Train it again:",
        "",
        "```bash",
        train_command(config),
        "```",
        "",
        *(_onnx_section(onnx) if onnx is not None else []),
    ]
    return "\n".join(lines)
