"""PPO's loss for a categorical policy as one autograd node, its gradient written out.

The generic loss (``PPO._losses``) builds its value from the distribution's log-probs and
entropy with ~30 small tensor ops, and autograd replays each backwards: on MiniGrid's and
CartPole's minibatches of 64 rows that graph, not the arithmetic, is most of the loss's
time. Here the forward pass runs the same ops without a graph (the loss and the statistics
come out with the same bits), and the backward pass is the closed form below, a handful of
whole-tensor ops. Tested against autograd (``tests/test_categorical_loss.py``).

Per row i of n, with p = softmax(z), a the action, r = exp(log p_a - old log p_a), A the
(normalized) advantage, c(r) = clamp(r, 1 - eps, 1 + eps) and H = -sum p log p:

    loss = -mean(min(A r, A c(r))) + value_coef * mean(l_v) - entropy_coef * mean(H)

    d loss / d log p_a = -A r g / n  where the unclipped term is the minimum or r is inside
                         the clip range (at a tie autograd gives each side half: A in all)
    d log p_a / d z    = onehot(a) - p
    d H / d z          = -p (log p + H)
    d l_v / d v        = 2 (v - R), or through the clipped value where it is the loss
"""

from __future__ import annotations

from typing import Any, Protocol

import torch


class LossSettings(Protocol):
    """The ``PPOConfig`` fields the loss reads."""

    normalize_advantage: bool
    value_clip: float | None
    value_clip_form: str
    value_coef: float
    entropy_coef: float


class _CategoricalPPOLoss(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any,
        logits: torch.Tensor,
        value: torch.Tensor,
        action: torch.Tensor,
        old_logp: torch.Tensor,
        old_value: torch.Tensor,
        adv: torch.Tensor,
        ret: torch.Tensor,
        clip: torch.Tensor,
        config: LossSettings,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        c = config
        n = logits.shape[0]
        log_p = torch.log_softmax(logits, dim=-1)
        p = log_p.exp()
        index = action.long().unsqueeze(-1)
        logp = log_p.gather(-1, index).squeeze(-1)
        entropy = -(p * log_p).sum(-1)
        if c.normalize_advantage and n > 1:
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        log_ratio = logp - old_logp
        ratio = log_ratio.exp()
        low, high = 1 - clip, 1 + clip
        clipped_ratio = ratio.clamp(low, high)
        unclipped, clipped = adv * ratio, adv * clipped_ratio
        policy_loss = -torch.min(unclipped, clipped).mean()
        error = value - ret
        if c.value_clip is not None:
            step = value - old_value
            clipped_error = old_value + step.clamp(-c.value_clip, c.value_clip) - ret
            clipped_loss = value_loss = clipped_error.pow(2)
            # the share of each error's gradient: all of the clipped one's ('clipped'), or
            # the larger's, halved at a tie as autograd's max does ('max')
            share = torch.ones_like(error)
            if c.value_clip_form == "max":
                plain_loss = error.pow(2)
                share = torch.where(
                    clipped_loss > plain_loss,
                    share,
                    torch.where(clipped_loss == plain_loss, 0.5, 0.0),
                )
                value_loss = torch.max(plain_loss, value_loss)
            inside = (step >= -c.value_clip) & (step <= c.value_clip)
            value_grad = 2 * (error * (1 - share) + clipped_error * share * inside)
            value_loss = value_loss.mean()
        else:
            value_loss = error.pow(2).mean()
            value_grad = 2 * error
        entropy_mean = entropy.mean()
        loss = policy_loss + c.value_coef * value_loss - c.entropy_coef * entropy_mean
        ratio_step = ratio - 1
        approx_kl = (ratio_step - log_ratio).mean()
        clip_fraction = (ratio_step.abs() > clip).float().mean()
        stats = torch.stack([policy_loss, value_loss, entropy_mean, approx_kl, clip_fraction])
        in_range = (ratio >= low) & (ratio <= high)
        # d loss / d log p_a per row, before the upstream gradient's factor
        logp_grad = torch.where((unclipped < clipped) | in_range, adv * ratio, 0.0).mul_(-1 / n)
        ctx.save_for_backward(p, log_p, index, entropy, logp_grad, value_grad)
        ctx.coefs = (c.value_coef / n, c.entropy_coef / n)
        ctx.mark_non_differentiable(stats)
        return loss, stats

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor, _: torch.Tensor) -> tuple[Any, ...]:
        p, log_p, index, entropy, logp_grad, value_grad = ctx.saved_tensors
        value_coef, entropy_coef = ctx.coefs
        logp_grad = logp_grad * grad
        # entropy's part, then log p_a's: (onehot(a) - p) times its row's factor
        logits_grad = p * (log_p + entropy.unsqueeze(-1)) * (entropy_coef * grad)
        logits_grad.sub_(p * logp_grad.unsqueeze(-1))
        logits_grad.scatter_add_(-1, index, logp_grad.unsqueeze(-1))
        return logits_grad, value_grad * (value_coef * grad), *(None,) * 7


def categorical_ppo_loss(
    logits: torch.Tensor,
    value: torch.Tensor,
    action: torch.Tensor,
    old_logp: torch.Tensor,
    old_value: torch.Tensor,
    adv: torch.Tensor,
    ret: torch.Tensor,
    clip: torch.Tensor,
    config: LossSettings,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(PPO's loss, its ``STATS``) for ``logits [n, A]`` and ``value [n]`` (every other
    tensor ``[n]``), as ``PPO._losses`` computes them from a categorical distribution,
    with the gradient of the loss in closed form."""
    # torch leaves ``Function.apply`` unannotated; it returns what ``forward`` does
    out: tuple[torch.Tensor, torch.Tensor] = _CategoricalPPOLoss.apply(  # type: ignore[no-untyped-call]
        logits, value, action, old_logp, old_value, adv, ret, clip, config
    )
    return out
