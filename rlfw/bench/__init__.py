"""``rlfw benchmark``: suites of (algorithm, env, budget) run over seeds against a peer
(SB3 on rl-baselines3-zoo's settings) and reported with rliable's statistics. Above
``rlfw.launch``: a benchmark run is built exactly as ``rlfw train`` builds it."""
