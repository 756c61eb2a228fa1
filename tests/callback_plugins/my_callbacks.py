"""Callbacks as a user writes them: plain classes, no base class, loaded with
``--callback my_callbacks:NAME`` (tests/test_callbacks.py puts this folder on the path)."""

import json
import os


class StopAfterTwoIterations:
    """Stops the run at its second iteration and writes what it saw to the folder named by
    ``RLFW_TEST_CALLBACK_LOG``, so the test reads it from another process."""

    def __init__(self):
        self.seen = {"start": 0, "iterations": [], "evals": [], "checkpoints": [], "end": None}

    def on_start(self, runner):
        self.seen["start"] += 1

    def on_iteration(self, metrics):
        self.seen["iterations"].append(metrics)
        return len(self.seen["iterations"]) < 2  # False at the second: stop

    def on_eval(self, metrics):
        self.seen["evals"].append(metrics)

    def on_checkpoint(self, path, env_steps):
        self.seen["checkpoints"].append([os.path.basename(path), env_steps])

    def on_end(self, result):
        self.seen["end"] = {"env_steps": result.env_steps, "stopped_by": result.stopped_by}
        with open(os.environ["RLFW_TEST_CALLBACK_LOG"], "w") as f:
            json.dump(self.seen, f)


class NoHooks:
    def unrelated(self):
        pass


class NeedsArguments:
    def __init__(self, threshold):
        self.threshold = threshold

    def on_iteration(self, metrics):
        return None


NOT_A_CLASS = 3
