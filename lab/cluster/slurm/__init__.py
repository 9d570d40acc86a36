"""Slurm as a cluster kind: a profile with ``slurm:`` allocates its hosts through Slurm
(or uses the allocation the lab runs in) and starts each rank with ``srun``."""
