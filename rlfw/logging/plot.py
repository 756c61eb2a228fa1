"""Learning-curve PNG from ``progress.csv`` (extra ``plot``: matplotlib)."""
from __future__ import annotations

import csv
import os

from rlfw.files import write_atomically


def plot_learning_curve(csv_path: str, png_path: str, title: str = "") -> str | None:
    """Plot rollout and eval mean returns against env steps; returns the path written, or
    None when matplotlib is missing or there is nothing to plot."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    if not os.path.exists(csv_path):
        return None
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    fig, ax = plt.subplots(figsize=(7, 4))
    plotted = False
    for key, label in (("rollout/return_mean", "training episodes"),
                       ("eval/return_mean", "evaluation")):
        points = [(float(r["step"]), float(r[key])) for r in rows if r.get(key) not in (None, "")]
        points = [(s, v) for s, v in points if v == v]  # drop NaN
        if points:
            xs, ys = zip(*points)
            ax.plot(xs, ys, marker="o" if key.startswith("eval") else None, label=label)
            plotted = True
    if not plotted:
        plt.close(fig)
        return None
    ax.set_xlabel("env steps")
    ax.set_ylabel("episode return")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    write_atomically(png_path, lambda f: fig.savefig(f, dpi=100, format="png"))
    plt.close(fig)
    return png_path
