"""EasyScale (SC'23, seed 002): accuracy-consistent elastic training with EasyScaleThreads
(Figs 9–13) and elastic scheduling of a job trace (Figs 14–15) — the room its notebooks
import from."""
