"""Learning-curve PNG from ``progress.csv`` (extra ``plot``: matplotlib)."""

from __future__ import annotations

import csv
import os
from typing import Any

from rlfw.runfolder.files import write_atomically


def figure_and_axes(
    figsize: tuple[float, float], nrows: int = 1, ncols: int = 1, **subplots: Any
) -> tuple[Any, Any]:
    """A matplotlib figure and its axes (``Figure.subplots``' shapes), made without pyplot:
    no global figure registry to close, and no backend switched in the caller's process (a
    notebook keeps its own). ``savefig`` draws it with Agg. Raises ImportError without
    matplotlib (extra ``plot``)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    return fig, fig.subplots(nrows, ncols, **subplots)


def plot_learning_curve(csv_path: str, png_path: str, title: str = "") -> str | None:
    """Plot rollout and eval mean returns against env steps; returns the path written, or
    None when matplotlib is missing or there is nothing to plot."""
    if not os.path.exists(csv_path):
        return None
    try:
        fig, ax = figure_and_axes((7, 4))
    except ImportError:
        return None
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    plotted = False
    for key, label in (
        ("rollout/return_mean", "training episodes"),
        ("eval/return_mean", "evaluation"),
    ):
        points = [(float(r["step"]), float(r[key])) for r in rows if r.get(key) not in (None, "")]
        points = [(s, v) for s, v in points if v == v]  # drop NaN
        if points:
            xs, ys = zip(*points)
            ax.plot(xs, ys, marker="o" if key.startswith("eval") else None, label=label)
            plotted = True
    if not plotted:
        return None
    ax.set_xlabel("env steps")
    ax.set_ylabel("episode return")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    write_atomically(png_path, lambda f: fig.savefig(f, dpi=100, format="png"))
    return png_path
