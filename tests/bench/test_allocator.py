"""``--allocator keep``: glibc keeps freed blocks for the next step, measured in page
faults (in a fresh process each, as the setting lasts for the process)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# a 64 MiB block (above glibc's largest mmap threshold, 32 MiB) allocated, written and
# freed ten times, as a training step does with its activations; prints faults per time
BLOCK_FAULTS = """
import ctypes, ctypes.util, resource, sys
from lab.bench.allocator import configure
print(configure(sys.argv[1]))
libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
size = 64 * 2**20
def once():
    block = libc.malloc(size)
    ctypes.memset(block, 1, size)
    libc.free(block)
once()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    once()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 10)
"""


def _faults_per_block(choice: str) -> float:
    out = subprocess.run(
        [sys.executable, "-c", BLOCK_FAULTS, choice],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=True,
    )
    return float(out.stdout.split()[-1])


def test_keep_serves_a_freed_block_again_without_faulting_its_pages() -> None:
    """glibc maps a 64 MiB block afresh at each allocation (16,384 pages faulted each
    time); kept, the block's pages stay with the process."""
    system, keep = _faults_per_block("system"), _faults_per_block("keep")
    assert system > 10_000, system
    assert keep < 100, keep
