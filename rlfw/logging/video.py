"""Episode videos: frames streamed into an mp4 (imageio's ffmpeg plugin, extra ``video``)
as they are rendered, plus an optional small GIF for docs."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

VIDEO_HINT = (
    "videos need the extra 'video' (imageio with its ffmpeg plugin): pip install 'rlfw[video]'"
)
GIF_WIDTH, GIF_EVERY, GIF_MAX_FRAMES = 320, 2, 300  # a docs GIF stays small: < ~2 MB


def imageio_module() -> Any:
    """``imageio.v2`` with ffmpeg available; ``ValueError`` with the install hint if not."""
    try:
        import imageio.v2 as imageio
        import imageio_ffmpeg  # noqa: F401
    except ImportError:
        raise ValueError(VIDEO_HINT) from None
    return imageio


def _even(frame: np.ndarray) -> np.ndarray:
    """yuv420p mp4 needs even sides: pad the last row/column by repeating it."""
    h, w = frame.shape[:2]
    if h % 2 or w % 2:
        frame = np.pad(frame, ((0, h % 2), (0, w % 2), (0, 0)), mode="edge")
    return frame


class EpisodeVideo:
    """One episode: ``add`` frames, then ``finish(name)`` renames the mp4 (and writes the
    GIF when ``gif``) or ``discard`` drops it. Written under a temp name until finished, so
    a folder never holds half a video under a final name."""

    def __init__(self, folder: str, fps: float, gif: bool = False):
        self.imageio = imageio_module()
        os.makedirs(folder, exist_ok=True)
        self.folder, self.fps = folder, fps
        self.tmp = os.path.join(folder, f".tmp-{os.getpid()}-{id(self)}.mp4")
        self.writer = self.imageio.get_writer(
            self.tmp, fps=fps, codec="libx264", macro_block_size=1, quality=7
        )
        self.gif_frames: list[np.ndarray] | None = [] if gif else None
        self.frames = 0

    def add(self, frame: np.ndarray) -> None:
        self.writer.append_data(_even(np.asarray(frame, dtype=np.uint8)))
        if (
            self.gif_frames is not None
            and self.frames % GIF_EVERY == 0
            and len(self.gif_frames) < GIF_MAX_FRAMES
        ):
            self.gif_frames.append(_shrink(frame))
        self.frames += 1

    def finish(self, name: str) -> list[str]:
        """Close as ``folder/name.mp4`` (+ ``name.gif``); returns the paths written."""
        self.writer.close()
        path = os.path.join(self.folder, f"{name}.mp4")
        os.replace(self.tmp, path)
        written = [path]
        if self.gif_frames:
            gif = os.path.join(self.folder, f"{name}.gif")
            duration = 1000.0 * GIF_EVERY / self.fps  # ms per GIF frame
            self.imageio.mimsave(gif, self.gif_frames, duration=duration, loop=0)
            written.append(gif)
        return written

    def discard(self) -> None:
        self.writer.close()
        if os.path.exists(self.tmp):
            os.unlink(self.tmp)


def _shrink(frame: np.ndarray) -> np.ndarray:
    """Every k-th row and column, so the GIF is at most ``GIF_WIDTH`` wide."""
    step = max(1, -(-frame.shape[1] // GIF_WIDTH))
    return np.ascontiguousarray(frame[::step, ::step])
