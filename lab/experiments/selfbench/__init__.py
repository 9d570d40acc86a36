"""The lab's own benchmarks (``make bench``): what a launch through the lab costs over the
bare launcher, how many lines per second it carries from ranks with none lost, and what
the lab's implementations of the papers' systems cost. Results go to ``results/bench/``."""
