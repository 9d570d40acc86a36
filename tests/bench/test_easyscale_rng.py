"""An EST's random generators survive a switch bit for bit, NumPy's copied in place
(lab.bench.easyscale.rng), and NumPy's public form is what checkpoints hold."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

np = pytest.importorskip("numpy")
torch = pytest.importorskip("torch")

from lab.bench.easyscale import rng  # noqa: E402


@pytest.fixture(autouse=True)
def _global_state() -> Iterator[None]:
    """Leave the global generators as the test found them."""
    kept = (torch.get_rng_state(), np.random.get_state(), random.getstate())
    yield
    torch.set_rng_state(kept[0])
    np.random.set_state(kept[1])
    random.setstate(kept[2])


def _draws() -> tuple[list[float], list[float], list[float]]:
    """What a mini-batch's augmentation and dropout draw; an odd count of normals leaves
    NumPy's legacy cache full."""
    return (torch.rand(3).tolist(), np.random.normal(size=3).tolist(),
            [random.random() for _ in range(3)])  # fmt: skip


def _switched() -> None:
    """Another EST's mini-batch in between: reseed and draw."""
    torch.manual_seed(99)
    np.random.seed(99)
    random.seed(99)
    _draws()


def test_numpy_state_is_copied_in_place_on_this_numpy() -> None:
    assert rng._locate() is not None  # else every switch pays the public API's ~90 µs


@pytest.mark.parametrize("fast", [True, False], ids=["in place", "public API"])
def test_restore_gives_back_the_same_draws(fast: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if not fast:
        monkeypatch.setattr(rng, "_locate", lambda: None)
    np.random.seed(5)
    np.random.normal(size=1)  # has_gauss = 1: the cached half of a pair must travel too
    state = rng.RNGState()
    state.capture()
    expected = _draws()
    _switched()
    state.restore()
    assert _draws() == expected


def test_the_kept_numpy_state_reads_as_the_public_api_gives_it() -> None:
    np.random.seed(7)
    np.random.normal(size=3)
    state = rng.NumpyState()
    state.capture()
    public = np.random.get_state()
    legacy = state.legacy()
    assert legacy[0] == public[0] and np.array_equal(legacy[1], public[1])
    assert legacy[2:] == public[2:] and legacy[3] == 1
    loaded = rng.NumpyState.from_legacy(legacy)
    np.random.seed(8)
    loaded.restore()
    after = np.random.get_state()
    assert np.array_equal(after[1], public[1]) and after[2:] == public[2:]


def test_a_checkpointed_state_restores_the_same_draws() -> None:
    random.seed(3)
    state = rng.RNGState()
    state.capture()
    expected = _draws()
    loaded = rng.RNGState.from_dict(state.to_dict())
    _switched()
    loaded.restore()
    assert _draws() == expected


def test_another_bit_generator_falls_back_to_the_public_api() -> None:
    original = np.random.mtrand._rand._bit_generator
    try:
        np.random.set_bit_generator(np.random.PCG64(11))
        assert rng._locate() is None
        state = rng.NumpyState()
        state.capture()
        expected = np.random.normal(size=3).tolist()
        np.random.normal(size=5)
        state.restore()
        assert np.random.normal(size=3).tolist() == expected
    finally:
        np.random.set_bit_generator(original)
    assert rng._locate() is not None  # found again for the Mersenne Twister
