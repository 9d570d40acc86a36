"""Per-notebook parameter overrides for make test's notebook runs: the smallest run that still
goes through every cell, system and figure; make run keeps the smoke scale."""

from __future__ import annotations

from typing import Any

LEAN: dict[str, dict[str, Any]] = {
    # chief revocations 10/20/30 steps after checkpoints 1-3 (three step counts: the chief
    # verdict's line), two checkpoint sizes, MobileNet's ~5 s steps left out; both worker
    # replacement modes kept (warm runs only here). (cut for make test)
    "cmdare/revocation.ipynb": {
        "since": [10, 20, 30],
        "checkpoint_models": ["tiny_cnn", "small_cnn"],
    },
    # two ratios (a gain per link), 3 timed steps, baseline and p3 (slicing runs in
    # one_iteration), both MXNet arms. (cut for make test)
    "p3/throughput_vs_bandwidth.ipynb": {
        "arms": ["baseline", "p3"],
        "ratios": [1.0, 0.25],
        "batch_size": 8,
        "steps": 6,  # 3 lost every timed step of the compute probe to the share switch at load 6
        "warmup_steps": 1,
        "mxnet_steps": 3,
    },
    # 1 and 2 hosts in one round, two links, a 1 MiB allreduce once; the fair-settings
    # rounds are the module's. (cut for make test)
    "cluster/emulation.ipynb": {
        "hosts": [1, 2],
        "spin_seconds": 1.0,
        "scaling_rounds": 1,
        "bandwidths": ["100mbit", "10gbit"],
        "allreduce_bytes": 1048576,
        "repeats": 1,
        "fair_steps": 4,
    },
    # 1 and 2 workers (the linear prediction needs two counts) with 1 and 2 servers.
    # (cut for make test)
    "cmdare/ps_bottleneck.ipynb": {"workers": [1, 2]},
    # two CNNs (holding models out needs two) at two cluster sizes (a fit needs two rows
    # a model), the second with one server. (cut for make test)
    "cmdare/speed_model.ipynb": {"cluster_sizes": [[1, 1], [2, 1]]},
    # a given link skips the compute probe; all three arms. (cut for make test)
    "p3/one_iteration.ipynb": {"bandwidth": "448mbit", "batch_size": 8},
    # k = 1, 2 ESTs, one cluster mix, a 300-s interval (the simulations' events are a fifth
    # of 60 s's). (cut for make test)
    "easyscale/fig14_15_trace.ipynb": {
        "ests": [1, 2],
        "seconds": 0.3,
        "interval_s": 300,
        "intervals_s": [300, 600],
        "mixes": [{"v100": 32, "p100": 16, "t4": 16}],
    },
    # both device types and all three levels, one launch each, 10 steps.
    # (cut for make test)
    "easyscale/fig12_determinism_cost.ipynb": {"repeats": 1, "steps": 10},
    # one protocol round (the first round always runs in full): the two ideals and all
    # four systems once at 2 workers, 6 runs instead of 13-20; 130 s -> 72 s
    "kungfu/fig9_scalability.ipynb": {"budget_s": 0, "min_rounds": 0},
    # one round of the four systems at 1 and 2 workers (the figure's per-worker lines and
    # the efficiency need both counts), 8 runs instead of ~25; 108 s before
    "benchmark/sync_sgd.ipynb": {"budget_s": 0, "min_rounds": 0},
    # one alternating run (monitor off and on within it) instead of 7-8; 94 s -> 27 s
    "kungfu/fig8_monitoring_overhead.ipynb": {"budget_s": 0},
    # both elastic systems grow and shrink once: the grow keeps its 15 s (20 s at load 7), 2 s
    # at 1 worker and after the shrink (0.03-0.8 s), each run 3 s shorter; 67 s before
    "kungfu/fig7_scaling.ipynb": {"schedule": "0:1,2:2,17:1,19:stop"},
    # every level and both DDP references, still 11 launches, one mini-batch a stage;
    # 51 s before
    "easyscale/fig9_accuracy_consistency.ipynb": {"steps": 1},
    # the adaptive policy and both fixed batches, one seed (one interval-less verdict);
    # 51 s before
    "kungfu/adaptive_batch.ipynb": {"seeds": 1},
    # the four switching variants once (13 launches -> 5 with the long step), two timed
    # steps each, the paper-like step twice; 43 s -> 26 s
    "easyscale/fig11_13_est_overhead.ipynb": {"repeats": 1, "steps": 3, "long_steps": 2},
    # already one run per system (3 runs of 15 steps, mostly start-up); 29 s -> 29 s
    "benchmark/async_sgd.ipynb": {},
}
