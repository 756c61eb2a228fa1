"""Presets as data: an algorithm's tuned settings are a table of entries, each for an env
family (and optionally one env of it) with a one-line source. The reasoning behind each
entry — what was measured, what was tried — is in the manual's presets page
(``docs/presets.md``), not between the numbers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlfw.envs.families import base_name, merge_settings


@dataclass(frozen=True)
class PresetEntry:
    """Settings for the envs of ``families`` (only env ``env``, a base name such as
    ``Pendulum`` or ``CartPoleNoVel``, when given), and where they come from."""

    families: tuple[str, ...]
    source: str
    settings: dict[str, Any] = field(default_factory=dict)
    env: str | None = None

    def applies(self, env_id: str, family: str) -> bool:
        return family in self.families and self.env in (None, base_name(env_id))


def resolve(table: tuple[PresetEntry, ...], env_id: str, family: str) -> dict[str, Any]:
    """The table's settings for ``env_id``: each entry that applies, in table order (the
    family's first, then the env's own), merged one group deep."""
    out: dict[str, Any] = {}
    for entry in table:
        if entry.applies(env_id, family):
            out = merge_settings(out, entry.settings)
    return out
