"""The backends' step functions are traced without AutoGraph (common.step_function): a
rank's first step must not spend seconds rewriting the engines' Python."""

from __future__ import annotations

import pytest

from lab.bench.backends import common


def test_a_step_function_traces_python_branches_and_leaves_tensor_ones_unconverted():
    tf = common.setup_tensorflow()

    @common.step_function(tf)
    def python_branch(first: bool) -> object:
        return tf.constant(1.0) if first else tf.constant(2.0)

    assert float(python_branch(True)) == 1.0
    assert float(python_branch(False)) == 2.0

    @common.step_function(tf)
    def tensor_branch(x: object) -> object:
        if x > 0:  # AutoGraph would turn this into a tf.cond; without it, tracing refuses
            return x
        return -x

    with pytest.raises(TypeError):
        tensor_branch(tf.constant(1.0))
