"""Which steps of a run have the monitor on, when the run measures its monitor against itself.

Two runs of one point differ here by ~10% whatever they monitor, more than the overheads
KungFu's Fig 8 reports; steps of one run share its start-up, its ranks' placement and
the machine's load. So with ``--alternate K`` a run switches its monitor off and on every
``K`` timed steps and tags each step with its phase, and the ratio of the two phases'
throughputs is one paired measurement of the overhead. Warm-up steps switch every step,
so that both step functions are traced (with the first batch and without) before timing
starts; timed steps start with the monitor off.
"""

from __future__ import annotations

ON, OFF = "on", "off"
PHASES = (OFF, ON)


def phase(step: int, warmup_steps: int, block: int) -> str:
    """The phase (``"on"`` or ``"off"``) of step ``step`` (0-based, warm-up included).

    Raises:
        ValueError: ``block`` < 1 or a negative step.
    """
    if block < 1 or step < 0:
        raise ValueError(f"need block >= 1 and step >= 0, got block={block}, step={step}")
    if step < warmup_steps:
        return PHASES[step % 2]
    return PHASES[((step - warmup_steps) // block) % 2]
