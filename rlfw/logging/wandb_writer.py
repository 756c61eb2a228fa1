"""Weights & Biases as one more writer (extra ``wandb``): the scalars every other writer
gets, the run's config, and evaluation videos. ``WANDB_MODE=offline`` works with no network
(``wandb sync RUN/wandb/offline-run-*`` uploads it later)."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from typing import Annotated, Any, Mapping

from rlfw.runfolder.files import write_text
from rlfw.utils.settings import Flag

WANDB_HINT = "--wandb needs the extra 'wandb': pip install 'rlfw[wandb]'"
RUN_ID_FILE = "wandb-run-id"


@dataclass
class WandbOptions:
    """Where a run appears in W&B (``--wandb``; ``--set wandb.project=...``)."""

    enabled: Annotated[bool, Flag("--wandb", const=True)] = False
    """Also log to Weights & Biases (extra [wandb]): the scalars, the config and videos;
    works offline with WANDB_MODE=offline."""
    project: str = "rlfw"
    """The W&B project."""
    entity: str | None = None
    """The W&B team or user (none: the logged-in default)."""
    group: str | None = None
    """The W&B group (sweeps and benchmarks set one per sweep or suite)."""
    name: str | None = None
    """The W&B run name (none: the run folder's name)."""


def wandb_module() -> Any:
    try:
        import wandb
    except ImportError:
        raise ValueError(WANDB_HINT) from None
    return wandb


class WandbWriter:
    """One W&B run per run folder: its id is kept in ``RUN/wandb-run-id``, so a resumed run
    continues the same W&B run (W&B drops rows at steps it already has)."""

    def __init__(self, log_dir: str, options: Mapping[str, Any], config: Mapping[str, Any]):
        self.wandb = wandb_module()
        id_path = os.path.join(log_dir, RUN_ID_FILE)
        if os.path.isfile(id_path) and not os.path.islink(id_path):
            with open(id_path, encoding="utf-8") as f:
                run_id = f.read().strip()
        else:
            run_id = secrets.token_hex(4)
            write_text(id_path, run_id + "\n")
        try:
            self.run = self.wandb.init(
                project=options.get("project") or "rlfw",
                entity=options.get("entity"),
                group=options.get("group"),
                name=options.get("name") or os.path.basename(os.path.abspath(log_dir)),
                id=run_id,
                resume="allow",
                dir=log_dir,
                config=config,
            )
        except Exception as err:  # wandb's own kinds (no login, no network, bad entity)
            raise ValueError(
                f"--wandb could not start a W&B run ({type(err).__name__}: "
                f"{str(err).rstrip('.')}): log in (`wandb login`), or log offline with "
                "WANDB_MODE=offline (`wandb sync` uploads it later)"
            ) from err

    def write(self, values: dict[str, float], step: int) -> None:
        self.run.log(dict(values), step=step)

    def write_video(self, key: str, path: str, step: int) -> None:
        self.run.log({key: self.wandb.Video(path, format="mp4")}, step=step)

    def close(self) -> None:
        self.run.finish()
        # wandb keeps a service process per Python process; stop it with the run, so a run
        # leaves no child process behind (the next run starts its own)
        self.wandb.teardown()
