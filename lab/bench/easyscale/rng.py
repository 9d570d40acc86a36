"""The global random number generators an EST owns, kept while it is switched out.

A training script draws from torch's, NumPy's and Python's global generators (and the
current GPU's), so each EST keeps its own state of every one of them. NumPy's public API
copies that state slowly: ``get_state`` and ``set_state`` move the 624 words of its
Mersenne Twister one at a time through Python, ~45 µs each way on this lab's CPU, more than
the rest of a switch on the smoke model together. NumPy documents the address of that state
(``bit_generator.ctypes.state_address``), so here a switch moves it as one 2.5 KB copy into a
buffer the EST owns. The legacy normal cache (``has_gauss``, ``gauss``: ``np.random.normal``
hands out its draws in pairs) sits beside it in the global ``RandomState``, which publishes
no address for it: ``_locate`` finds it once, by the pointer to the bit generator stored
just before it, and checks the place by setting a known state through the public API and
reading it back. Where anything of that does not hold (another NumPy, another bit
generator), the public API is used. Checkpoints hold the public APIs' forms either way.
"""

from __future__ import annotations

import ctypes
import random
from dataclasses import dataclass
from typing import Any

_WORDS = 624  # the Mersenne Twister's state


class _MTState(ctypes.Structure):
    """NumPy's ``mt19937_state`` (numpy/random/src/mt19937/mt19937.h)."""

    _fields_ = [("key", ctypes.c_uint32 * _WORDS), ("pos", ctypes.c_int)]


class _AugState(ctypes.Structure):
    """NumPy's ``aug_bitgen_t`` (legacy-distributions.h): the legacy normal cache."""

    _fields_ = [
        ("bit_generator", ctypes.c_void_p),
        ("has_gauss", ctypes.c_int),
        ("gauss", ctypes.c_double),
    ]


@dataclass(frozen=True)
class _Place:
    """Where the global RandomState keeps its state, for the bit generator it had then."""

    bit_generator: Any
    mt: _MTState
    aug: _AugState


_place: _Place | None = None
_unplaced: Any = None  # the bit generator _locate failed for: the public API, no retry


def _global() -> Any:
    import numpy as np

    return np.random.mtrand._rand


def _locate() -> _Place | None:
    """The global RandomState's state in memory, checked; None where it cannot be trusted."""
    global _place, _unplaced
    rs = _global()
    bg = rs._bit_generator
    if _place is not None and _place.bit_generator is bg:
        return _place
    if bg is _unplaced:
        return None
    _place, _unplaced = None, bg
    if type(bg).__name__ != "MT19937":
        return None
    found = _scan(rs, bg.ctypes.state_address)
    if found is None:
        return None
    place = _Place(bg, _MTState.from_address(bg.ctypes.state_address), found)
    if not _checks(place):
        return None
    _place, _unplaced = place, None
    return place


def _scan(rs: Any, state_address: int) -> _AugState | None:
    """The ``_aug_state`` inside RandomState ``rs``: it points at the object's own copy of
    the bit generator's struct, whose first word is ``state_address``."""
    size = type(rs).__basicsize__
    words = (ctypes.c_void_p * (size // 8)).from_address(id(rs))
    base = id(rs)
    for i, word in enumerate(words):
        if word != state_address:
            continue
        bitgen = base + 8 * i  # RandomState._bitgen: its first field is the state pointer
        for j in range(i + 1, len(words) - 2):
            if words[j] == bitgen:
                return _AugState.from_address(base + 8 * j)
    return None


def _checks(place: _Place) -> bool:
    """Whether ``place`` reads and writes what the public API does (the state is put back)."""
    import numpy as np

    kept = np.random.get_state()
    try:
        for has_gauss, gauss in ((1, 0.1234567890123), (0, 0.0)):
            key = np.arange(7, 7 + _WORDS, dtype=np.uint32)
            np.random.set_state(("MT19937", key, 5, has_gauss, gauss))
            if (
                list(place.mt.key) != key.tolist()
                or place.mt.pos != 5
                or (place.aug.has_gauss, place.aug.gauss) != (has_gauss, gauss)
            ):
                return False
        place.aug.has_gauss, place.aug.gauss = 1, 0.5
        return np.random.get_state()[3:] == (1, 0.5)
    finally:
        np.random.set_state(kept)


class NumpyState:
    """One EST's copy of NumPy's global generator."""

    __slots__ = ("_gauss", "_legacy", "_mt")

    def __init__(self) -> None:
        self._mt = _MTState()
        self._gauss = (0, 0.0)
        self._legacy: Any = None  # the public API's form, where it is used

    def capture(self) -> None:
        place = _locate()
        if place is None:
            import numpy as np

            self._legacy = np.random.get_state(legacy=False)  # any bit generator's
            return
        ctypes.memmove(
            ctypes.addressof(self._mt), ctypes.addressof(place.mt), ctypes.sizeof(_MTState)
        )
        self._gauss = (place.aug.has_gauss, place.aug.gauss)
        self._legacy = None

    def restore(self) -> None:
        place = _locate()
        if place is None or self._legacy is not None:
            import numpy as np

            np.random.set_state(self.legacy())
            return
        ctypes.memmove(
            ctypes.addressof(place.mt), ctypes.addressof(self._mt), ctypes.sizeof(_MTState)
        )
        place.aug.has_gauss, place.aug.gauss = self._gauss

    def legacy(self) -> Any:
        """This state in the public API's form: ``np.random.get_state()``'s tuple (a dict
        where the public API held it for another bit generator)."""
        import numpy as np

        if self._legacy is not None:
            return self._legacy
        key = np.frombuffer(bytes(self._mt.key), dtype=np.uint32).copy()
        return ("MT19937", key, int(self._mt.pos), int(self._gauss[0]), float(self._gauss[1]))

    @classmethod
    def from_legacy(cls, state: Any) -> NumpyState:
        out = cls()
        out._legacy = state
        return out


class RNGState:
    """One EST's copy of every global generator: torch's, NumPy's, Python's, the GPU's."""

    __slots__ = ("cuda", "numpy", "python", "torch")

    def __init__(self) -> None:
        self.torch: Any = None
        self.numpy = NumpyState()
        self.python: Any = None
        self.cuda: Any = None

    def capture(self) -> None:
        """Switch out: keep the generators' states."""
        import torch

        self.torch = torch.get_rng_state()
        self.numpy.capture()
        self.python = random.getstate()
        if torch.cuda.is_initialized():  # dropout on a GPU draws from it
            self.cuda = torch.cuda.get_rng_state()

    def restore(self) -> None:
        """Switch in: put this EST's states in place."""
        import torch

        torch.set_rng_state(self.torch)
        self.numpy.restore()
        random.setstate(self.python)
        if self.cuda is not None:
            torch.cuda.set_rng_state(self.cuda)

    def to_dict(self) -> dict[str, Any]:
        """The checkpoint's form: what each library's own get-state call returns."""
        out = {"torch": self.torch, "numpy": self.numpy.legacy(), "python": self.python}
        return out if self.cuda is None else {**out, "cuda": self.cuda}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RNGState:
        out = cls()
        out.torch, out.python = data["torch"], data["python"]
        out.numpy = NumpyState.from_legacy(data["numpy"])
        out.cuda = data.get("cuda")
        return out
