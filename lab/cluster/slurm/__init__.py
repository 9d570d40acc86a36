"""Slurm as a cluster kind: a profile with ``slurm:`` allocates its hosts through Slurm (or
uses the allocation the lab runs in); what runs on its nodes starts through ``srun``, and
mpirun reaches them with srun as its agent (lab.cluster.slurm.hook)."""
