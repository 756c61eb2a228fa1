"""Models: actor-critic MLP structure, CNN input handling."""

import numpy as np
import pytest
import torch

from rlfw.models import CnnActorCritic, MlpActorCritic, NatureCNN


def test_mlp_actor_critic_has_separate_policy_and_value_networks():
    torch.manual_seed(0)
    model = MlpActorCritic((4,), 2, hidden=(64, 64))
    params, value = model(torch.zeros(5, 4))
    assert params.shape == (5, 2) and value.shape == (5,)
    # Initial policy close to uniform (output gain 0.01), value head unscaled (gain 1).
    assert model.pi[-1].weight.abs().max() < 0.05 < model.v[-1].weight.abs().max()
    model.v[-1].bias.data += 1.0  # the value net changes without touching the policy
    assert torch.equal(model(torch.zeros(5, 4))[0], params)


def test_nature_cnn_scales_uint8_frames_and_keeps_leading_dims():
    torch.manual_seed(0)
    cnn = NatureCNN(4, 84)
    frames = torch.randint(0, 256, (2, 3, 4, 84, 84), dtype=torch.uint8)
    out = cnn(frames)
    assert out.shape == (2, 3, 512)
    nhwc = frames.reshape(6, 4, 84, 84).contiguous(memory_format=torch.channels_last)
    manual = cnn.fc(cnn.convs(nhwc.float() * (1.0 / 255.0))).reshape(2, 3, 512)
    assert torch.allclose(out, manual, atol=1e-6)


def test_nature_cnn_channels_last_computes_the_same_function():
    torch.manual_seed(0)
    nhwc = NatureCNN(4, 84)
    torch.manual_seed(0)
    nchw = NatureCNN(4, 84, channels_last=False)
    conv = nhwc.convs[0].weight
    assert conv.is_contiguous(memory_format=torch.channels_last) and not conv.is_contiguous()
    assert torch.equal(conv, nchw.convs[0].weight)  # same init, other layout
    frames = torch.randint(0, 256, (5, 4, 84, 84), dtype=torch.uint8)
    # Other kernels sum in another order: equal up to float32 rounding.
    assert torch.allclose(nhwc(frames), nchw(frames), rtol=1e-4, atol=1e-5)


def test_the_cnn_actor_critic_starts_its_gaussian_at_log_std_init():
    """Continuous actions from images: the CNN actor-critic honours ``log_std_init`` as the
    MLP and recurrent ones do."""
    net = CnnActorCritic((4, 10, 10), 2, gaussian_dim=2, log_std_init=-1.5)
    params, _ = net(torch.zeros(3, 4, 10, 10, dtype=torch.uint8))
    assert torch.equal(net.log_std.data, torch.full((2,), -1.5))
    assert torch.equal(params[:, 2:], torch.full((3, 2), -1.5))


def test_gsde_samples_latent_times_held_noise_and_scores_it_under_its_gaussian():
    """gSDE: action = mean + latent @ (std * noise) with the policy's last hidden features
    as latent; its log-prob and entropy are a Gaussian's of variance latent^2 @ std^2
    (checked against torch.distributions); the noise scale trains ``log_std`` only, not the
    features (detached, SB3's default)."""
    import gymnasium as gym

    from rlfw.agents import ActorCriticAgent
    from rlfw.envs import EnvSpaces

    torch.manual_seed(0)
    spaces = EnvSpaces(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Box(-2, 2, (2,)))
    agent = ActorCriticAgent.build(spaces, hidden=(8,), log_std_init=-0.5, sde_sample_freq=4)
    obs, noise = torch.randn(5, 3), torch.randn(5, 8, 2)
    action = agent.step(obs, noise).action
    model = agent.model
    latent = torch.tanh(model.pi[0](obs))
    mean = model.pi[-1](latent)
    std = model.log_std.exp()  # [8, 2]
    expected = mean + torch.einsum("bl,bla->ba", latent, std * noise)
    assert torch.allclose(action, expected, atol=1e-6)
    gaussian = torch.distributions.Normal(mean, ((latent**2) @ std**2 + 1e-6).sqrt())
    logp, entropy, _ = agent.evaluate_actions(obs, action)
    assert torch.allclose(logp, gaussian.log_prob(action).sum(-1), atol=1e-5)
    assert torch.allclose(entropy, gaussian.entropy().sum(-1), atol=1e-5)
    agent.eval_mode()
    assert torch.allclose(agent.step(obs, noise).action, mean, atol=1e-6)
    # the variance's gradient reaches log_std but not the features
    entropy.sum().backward()
    features_grad = model.pi[0].weight.grad
    assert model.log_std.grad.abs().sum() > 0
    assert features_grad is None or not features_grad.any()


def test_gsde_is_refused_where_there_is_no_mlp_gaussian_policy():
    import gymnasium as gym
    import pytest

    from rlfw.agents import ActorCriticAgent
    from rlfw.envs import EnvSpaces

    box = EnvSpaces(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Box(-2, 2, (2,)))
    with pytest.raises(
        ValueError,
        match=r"sde_sample_freq=4 \(gSDE\) is for Box actions; "
        r"Discrete\(2\) is not one",
    ):
        ActorCriticAgent.build(
            EnvSpaces(box.observation, gym.spaces.Discrete(2)), sde_sample_freq=4
        )
    with pytest.raises(
        ValueError,
        match="gSDE.*model 'mlp' with recurrent='lstm' has no gSDE: set sde_sample_freq=0",
    ):
        ActorCriticAgent.build(box, recurrent="lstm", sde_sample_freq=4)
    with pytest.raises(ValueError, match=r"sde_sample_freq must be an int >= 0.*got -1"):
        ActorCriticAgent.build(box, sde_sample_freq=-1)


def test_multi_categorical_sums_its_heads_and_samples_each_from_its_own_uniform():
    from rlfw.agents.distributions import MultiCategorical

    dist = MultiCategorical([2, 3])
    logits = torch.tensor([[0.0, 1.0, 0.5, -1.0, 2.0]])
    heads = [
        torch.distributions.Categorical(logits=logits[:, :2]),
        torch.distributions.Categorical(logits=logits[:, 2:]),
    ]
    action = torch.tensor([[1, 2]])
    logp, entropy = dist.log_prob_and_entropy(logits, action)
    expected = heads[0].log_prob(action[:, 0]) + heads[1].log_prob(action[:, 1])
    assert torch.allclose(logp, expected)
    assert torch.allclose(entropy, heads[0].entropy() + heads[1].entropy())
    # inverse CDF per head: u below the first class's mass picks 0, above all but the last
    p0, p1 = heads[0].probs[0], heads[1].probs[0]
    low = torch.tensor([[float(p0[0]) - 1e-3, float(p1[0]) - 1e-3]])
    high = torch.tensor([[float(p0[0]) + 1e-3, float(p1[:2].sum()) + 1e-3]])
    assert dist.sample(logits, low).tolist() == [[0, 0]]
    assert dist.sample(logits, high).tolist() == [[1, 2]]
    assert dist.greedy(logits).tolist() == [[1, 2]]


def test_bernoulli_bits_match_torch_distributions():
    from rlfw.agents.distributions import Bernoulli

    dist = Bernoulli(3)
    logits = torch.tensor([[-1.0, 0.0, 2.0]])
    action = torch.tensor([[1, 0, 1]])
    reference = torch.distributions.Bernoulli(logits=logits)
    logp, entropy = dist.log_prob_and_entropy(logits, action)
    assert torch.allclose(logp, reference.log_prob(action.float()).sum(-1))
    assert torch.allclose(entropy, reference.entropy().sum(-1))
    u = torch.sigmoid(logits) + torch.tensor([[-1e-3, 1e-3, -1e-3]])
    assert dist.sample(logits, u).tolist() == [[1, 0, 1]]
    assert dist.greedy(logits).tolist() == [[0, 0, 1]]


def test_multi_discrete_actions_reach_the_env_in_its_shape_and_offsets():
    import gymnasium as gym

    from rlfw.agents import ActorCriticAgent
    from rlfw.envs import EnvSpaces

    space = gym.spaces.MultiDiscrete([[2, 3], [4, 5]], start=[[1, 0], [0, -2]])
    obs = gym.spaces.Box(-1, 1, (2,), np.float32)
    agent = ActorCriticAgent.build(EnvSpaces(obs, space))
    assert agent.noise_shape == (4,) and agent.distribution.n_params == 14
    actions = agent.env_action(torch.tensor([[1, 2, 3, 4], [0, 0, 0, 0]]))
    assert actions.shape == (2, 2, 2)
    assert actions.tolist() == [[[2, 2], [3, 2]], [[1, 0], [0, -2]]]
    assert all(space.contains(a) for a in actions)


def test_multi_discrete_codes_are_each_heads_one_hot_concatenated_and_bad_codes_refused():
    import gymnasium as gym
    import torch.nn.functional as F

    from rlfw.models.encoders import leaf_encoder

    nvec = np.broadcast_to(np.array([11, 6, 3]), (7, 7, 3)).copy()  # MiniGrid's view
    space = gym.spaces.MultiDiscrete(nvec, dtype=np.uint8, seed=0)
    codes = torch.as_tensor(np.stack([space.sample() for _ in range(5)]))
    expected = torch.cat(
        [F.one_hot(c.long(), int(n)).float() for c, n in zip(codes.reshape(5, -1).T, nvec.flat)],
        dim=-1,
    )
    encoder = leaf_encoder(space)
    assert torch.equal(encoder(codes), expected) and encoder.out_dim == 980
    shifted = leaf_encoder(gym.spaces.MultiDiscrete([3, 4], start=[-1, 2]))
    assert torch.equal(
        shifted(torch.tensor([[-1, 5], [1, 2]])),
        torch.tensor([[1.0, 0, 0, 0, 0, 0, 1], [0, 0, 1, 1, 0, 0, 0]]),
    )
    bad = codes.clone()
    bad[0, 3, 3, 2] = 3  # a state index past the third head's 3
    with pytest.raises(ValueError, match="outside MultiDiscrete"):
        encoder(bad)


def test_modes_switch_only_a_model_whose_modules_compute_differently_in_them():
    """A plain MLP actor-critic computes the same in train and eval mode: the agent skips
    the walk over its modules; a dropout layer, a recurrent core or a module of the
    user's (which may read ``self.training``) makes every switch real."""
    import gymnasium as gym

    from rlfw.agents import ActorCriticAgent
    from rlfw.agents.base import modes_matter
    from rlfw.envs import EnvSpaces

    spaces = EnvSpaces(gym.spaces.Box(-1, 1, (4,), np.float32), gym.spaces.Discrete(2))
    agent = ActorCriticAgent.build(spaces)
    assert not modes_matter(agent.model)
    agent.sample_mode()
    assert agent.model.training and not agent.greedy  # no walk: nothing to change
    agent.eval_mode()
    assert agent.greedy

    class Users(torch.nn.Module):
        def forward(self, x):
            return x * 2 if self.training else x

    for extra in (torch.nn.Dropout(0.1), torch.nn.LSTM(2, 2), Users()):
        agent = ActorCriticAgent.build(spaces)
        agent.model.extra = extra
        assert modes_matter(agent.model)
        agent.sample_mode()
        assert not extra.training
        agent.train_mode()
        assert extra.training
    assert modes_matter(ActorCriticAgent.build(spaces, recurrent="lstm").model)
