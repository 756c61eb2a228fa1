"""A trained agent's deterministic policy as ONNX (``rlfw export RUN OUT --onnx``): a
``policy.onnx`` that onnxruntime runs without torch, on a robot, in a game engine or a
browser, checked at export against the agent itself on real observations.

The graph is the agent's own greedy step traced once (torch's TorchScript-based exporter,
the batch dimension left free): every observation leaf in (a Dict's by its path, the
``action_mask`` leaf among them where the env has one), observation normalization inside,
the action out as rlfw's agent gives it; a recurrent agent also takes its state and gives
the next one (zeros start an episode)."""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from rlfw.agents.base import Agent
from rlfw.buffers.tree import Tree, tree_paths

ONNX_FILE = "policy.onnx"
STATE = "state"
NEXT_STATE = "next_state"
ACTION = "action"
# onnxruntime's kernels against torch's: measured within 1e-7 on every family tried
FLOAT_TOLERANCE = 1e-5


def onnx_runtime() -> Any:
    """The ``onnxruntime`` module, or ``ValueError`` naming the extra to install."""
    try:
        import onnx  # noqa: F401  # the exporter writes through it
        import onnxruntime
    except ImportError:
        raise ValueError(
            "ONNX export needs onnx and onnxruntime, which are not installed: "
            "pip install -e '.[onnx]'"
        ) from None
    return onnxruntime


def input_name(path: str) -> str:
    """An observation leaf's ONNX input name: its path (``image``, ``robot.joints``), or
    ``observation`` for a bare Box."""
    return path or "observation"


class GreedyPolicy(nn.Module):
    """The agent's greedy ``step`` as a module of tensors: the observation leaves (in
    ``paths`` order) and, for a recurrent agent, its state in; the action (and the next
    state) out."""

    def __init__(self, agent: Agent, paths: list[str]):
        super().__init__()
        self.agent = agent
        self.model = getattr(agent, "model")  # its parameters: the graph's initializers
        self.paths = paths
        self.recurrent = agent.initial_state(1) is not None

    def _observation(self, leaves: tuple[torch.Tensor, ...]) -> Any:
        if self.paths == [""]:
            return leaves[0]
        tree: dict[str, Any] = {}
        for path, leaf in zip(self.paths, leaves):
            *parents, last = path.split(".")
            node = tree
            for key in parents:
                node = node.setdefault(key, {})
            node[last] = leaf
        return tree

    def forward(self, *inputs: torch.Tensor) -> Any:
        leaves, state = (
            inputs[: len(self.paths)],
            inputs[len(self.paths)] if self.recurrent else None,
        )
        n = leaves[0].shape[0]
        noise = torch.zeros((n, *self.agent.noise_shape))  # greedy: drawn from nothing
        step = self.agent.step(self._observation(leaves), noise, None, state)
        return (step.action, step.state) if self.recurrent else step.action


@dataclass
class OnnxCheck:
    """How the exported graph compared with the agent on ``rows`` real observations."""

    rows: int
    max_difference: float
    inputs: list[str]
    outputs: list[str]


def export_onnx(agent: Agent, observations: Tree, path: str) -> OnnxCheck:
    """Write ``agent``'s greedy policy to ``path`` and check it: onnxruntime's actions on
    ``observations`` (a tree of ``[n, ...]`` arrays, real ones) equal the agent's
    (discrete actions exactly, continuous ones within 1e-5), else ``RuntimeError``."""
    ort = onnx_runtime()
    was_greedy, epsilon = agent.greedy, getattr(agent, "eval_epsilon", None)
    agent.eval_mode()
    if epsilon is not None:
        setattr(agent, "eval_epsilon", 0.0)  # the deterministic policy: no ε
    try:
        leaves = tree_paths(observations)
        paths = [p for p, _ in leaves]
        inputs = tuple(torch.as_tensor(np.asarray(leaf)) for _, leaf in leaves)
        policy = GreedyPolicy(agent, paths)
        names = [input_name(p) for p in paths]
        outputs = [ACTION]
        if policy.recurrent:
            state = agent.initial_state(len(inputs[0]))
            assert state is not None  # a recurrent agent's
            inputs += (state,)
            names.append(STATE)
            outputs.append(NEXT_STATE)
        with torch.no_grad():
            expected = policy(*inputs)
        part = f"{path}.part"  # checked before it takes the name
        with warnings.catch_warnings():  # the TorchScript exporter's deprecation notice
            warnings.simplefilter("ignore")
            torch.onnx.export(
                policy,
                inputs,
                part,
                input_names=names,
                output_names=outputs,
                dynamic_axes={name: {0: "batch"} for name in [*names, *outputs]},
                dynamo=False,
            )
    finally:
        agent.greedy = was_greedy
        if epsilon is not None:
            setattr(agent, "eval_epsilon", epsilon)
    try:
        session = ort.InferenceSession(part, providers=["CPUExecutionProvider"])
        got = session.run(None, {name: x.numpy() for name, x in zip(names, inputs)})
        difference = _largest_difference(
            outputs, got, [expected] if not policy.recurrent else list(expected)
        )
    except BaseException:
        os.remove(part)
        raise
    os.replace(part, path)
    return OnnxCheck(len(inputs[0]), difference, names, outputs)


def _largest_difference(outputs: list[str], got: list[Any], want: list[torch.Tensor]) -> float:
    """The largest gap between onnxruntime's outputs and the agent's; ``RuntimeError``
    where one is out of tolerance (discrete actions: none at all)."""
    difference = 0.0
    for name, g, w in zip(outputs, got, want):
        gap = float(
            np.max(np.abs(np.asarray(g, np.float64) - w.numpy().astype(np.float64)), initial=0)
        )
        if gap > (FLOAT_TOLERANCE if torch.is_floating_point(w) else 0):
            raise RuntimeError(
                f"the exported ONNX policy's {name} disagrees with the agent on real "
                f"observations (largest difference {gap:.3g}); {ONNX_FILE} was not written"
            )
        difference = max(difference, gap)
    return difference
