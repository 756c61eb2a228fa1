"""Samplers, algorithms and runners are declared once (rlfw/registry.py): validation, CLI
choices, errors and the docs' table come from there, and a user registers their own from a
script — here, from this file, outside the package — and trains with them."""
import csv
import json
from dataclasses import dataclass
from pathlib import Path

import pytest

import rlfw
from rlfw.algos.optim import gradient_step
from rlfw.algos.pg.base import PolicyGradient
from rlfw.algos.pg.common import common_checks
from rlfw.checks import check_config
from rlfw.cli import main
from rlfw.registry import ALGOS, RUNNERS, SAMPLERS, build_actor_critic, sampler_table


class CountedSerialSampler(rlfw.SerialSampler):
    """A user's sampler: the serial one, counting the batches it hands out."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.batches = 0

    def obtain_samples(self, itr):
        self.batches += 1
        return super().obtain_samples(itr)


@dataclass
class VanillaPGConfig:
    learning_rate: float = 1e-3
    optimizer: str = "adam"
    optimizer_eps: float = 1e-8
    gamma: float = 0.99
    gae_lambda: float = 1.0
    max_grad_norm: float | None = None
    reward_clip: float = 10.0
    normalize_reward: bool = False

    def validate(self) -> None:
        check_config("VanillaPGConfig", **common_checks(self))


class VanillaPG(PolicyGradient):
    """A user's algorithm: REINFORCE with a value baseline, one step per batch."""

    @classmethod
    def default_config(cls) -> VanillaPGConfig:
        return VanillaPGConfig()

    def optimize(self, samples, itr):
        from rlfw.algos.pg.common import advantages

        adv, ret = advantages(samples, self.config)
        logp, _, value = self.agent.evaluate_actions(samples.observation.flatten(0, 1),
                                                     samples.action.flatten(0, 1))
        loss = -(adv * logp).mean() + 0.5 * (ret - value).pow(2).mean()
        gradient_step(self.optimizer, self.flat, loss, self.config.max_grad_norm)
        return {"train/vpg_loss": loss.detach().item()}


@pytest.fixture
def registered():
    rlfw.register_sampler("counted", CountedSerialSampler)
    rlfw.register_algo("vpg", VanillaPG, VanillaPGConfig, build_actor_critic)
    try:
        yield
    finally:  # the registries outlive the test: leave them as they were
        SAMPLERS.remove("counted")
        ALGOS.remove("vpg")


def test_a_sampler_and_an_algorithm_registered_outside_rlfw_train_end_to_end(registered,
                                                                              tmp_path):
    config = rlfw.RunConfig.for_env("CartPole-v1", algo="vpg", steps=1024,
                                    sampler="counted", vpg={"learning_rate": 3e-3})
    assert config.vpg == VanillaPGConfig(learning_rate=3e-3)
    with rlfw.build_runner(config, str(tmp_path / "run"), progress=False,
                           stdout=False) as runner:
        result = runner.train()
    assert isinstance(runner.sampler, CountedSerialSampler)
    assert isinstance(runner.algo, VanillaPG)
    assert runner.sampler.batches == result.iterations == 4
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["algo"] == "vpg" and saved["sampler"] == "counted"
    assert saved["vpg"]["learning_rate"] == 3e-3
    with open(tmp_path / "run" / "progress.csv") as f:
        rows = list(csv.DictReader(f))
    assert rows[-1]["train/vpg_loss"] != ""
    # The saved config rebuilds the same run (e.g. for --resume).
    reloaded = rlfw.RunConfig.load(str(tmp_path / "run"))
    assert reloaded.vpg == config.vpg and reloaded.to_dict() == config.to_dict()


def test_the_cli_trains_a_registered_sampler_and_algorithm(registered, tmp_path, capsys):
    code = main(["train", "--algo", "vpg", "--env", "CartPole-v1", "--steps", "512",
                 "--set", "sampler=counted", "--set", "vpg.gamma=0.9", "--no-progress",
                 "--log-dir", str(tmp_path / "run")])
    assert code == 0, capsys.readouterr().err
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert (saved["algo"], saved["sampler"], saved["vpg"]["gamma"]) == ("vpg", "counted", 0.9)


def test_unknown_names_are_refused_naming_what_is_registered(registered):
    for kind, name, registry in (("sampler", "warp", SAMPLERS), ("algorithm", "sac", ALGOS),
                                 ("runner", "hyper", RUNNERS)):
        with pytest.raises(ValueError, match=rf"{kind} '{name}' unknown; choose from "
                                             rf"\(.*'{registry.names()[-1]}'\)"):
            registry.get(name)
    assert "counted" in SAMPLERS.names() and "vpg" in ALGOS.names()
    with pytest.raises(ValueError, match="sampler 'counted' is registered already"):
        rlfw.register_sampler("counted", CountedSerialSampler)


def test_a_replay_algorithm_is_refused_by_the_concurrent_runner_from_the_registry():
    config = rlfw.RunConfig(algo="dqn", runner="concurrent")
    with pytest.raises(ValueError, match="runner 'concurrent' with algo 'dqn' cannot work"):
        config.validate()


def test_the_docs_table_of_samplers_is_the_registry_s():
    docs = (Path(__file__).parents[1] / "docs" / "samplers.md").read_text()
    assert sampler_table() in docs, "regenerate the table: python -c 'from rlfw.registry " \
                                    "import sampler_table; print(sampler_table())'"
    for spec in SAMPLERS:
        assert f"`{spec.name}`" in docs
