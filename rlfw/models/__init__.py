"""Plain ``nn.Module`` networks."""

from rlfw.models.actor_critic import CnnActorCritic, MlpActorCritic
from rlfw.models.cnn import NatureCNN
from rlfw.models.mlp import MLP, orthogonal_init

__all__ = ["CnnActorCritic", "MLP", "MlpActorCritic", "NatureCNN", "orthogonal_init"]
