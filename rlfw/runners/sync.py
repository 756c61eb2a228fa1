"""SyncRunner: sample a batch, then learn from it (rlpyt's MinibatchRl, SB3's learn loop)."""

from __future__ import annotations

from rlfw.runners.base import Runner, policy_versions
from rlfw.runners.schedule import RunSchedule, TrainResult

__all__ = ["RunSchedule", "SyncRunner", "TrainResult"]


class SyncRunner(Runner):
    """Sample batch ``itr`` with the learner's weights after ``itr`` updates, then learn from
    it: no lag, bitwise deterministic for every sampler (see ``Runner`` for the rest)."""

    def _iteration(self, itr: int) -> bool:
        with self.reporter.timing.add_time("sample"):
            samples, episodes = self.sampler.obtain_samples(itr)
        policy_versions(samples).fill_(itr)  # sampled with the weights after itr updates
        self.reporter.episodes += episodes
        self._learn(samples, itr)
        return self._after_update(itr)
