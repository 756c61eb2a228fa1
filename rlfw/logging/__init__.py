"""Logging: record/dump logger, writers, timing, learning-curve plot."""

from rlfw.logging.logger import Logger
from rlfw.logging.plot import plot_learning_curve
from rlfw.logging.timing import Timing
from rlfw.logging.writers import CsvWriter, StdoutTable, TensorBoardWriter, tensorboard_available

__all__ = [
    "CsvWriter",
    "Logger",
    "StdoutTable",
    "TensorBoardWriter",
    "Timing",
    "plot_learning_curve",
    "tensorboard_available",
]
