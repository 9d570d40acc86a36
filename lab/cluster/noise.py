"""Telling a rank's start-up chatter from what a person must see (the run view's colours).

TensorFlow, XLA and absl write their start-up notices to stderr in glog form (``I0000
00:00:1795442955.887603 18614 port.cc:153] oneDNN custom operations are on...``, or TF's
older ``2024-05-01 12:00:00.1: I tensorflow/core/util/port.cc:113] ...``); every rank of a
TF job prints them, and on a CPU machine even some ``E`` lines (``failed call to cuInit``)
are expected. Shown in red, they hide real errors. So a line is classified:

- ``record``: a lab record (``@lab {...}``), quieter than the rank's own words;
- ``info``: start-up noise: glog/absl lines at level I or W, Python logging of TF/absl at
  INFO or WARNING, a short list of known harmless E lines and continuation lines, and the
  lab's own housekeeping (the CPU pinning notice, the guard ending what a rank left behind);
- ``error``: anything else on stderr (tracebacks, ``Error``, an unknown ``E`` line);
- ``out``: anything else on stdout.

Only the view uses this: the rank's log file keeps every line as printed.
"""

from __future__ import annotations

import re

from lab.metrics.records import PREFIX

CLASSES = ("record", "info", "error", "out")

# glog / absl: "I0000 00:00:1795442955.887603   18614 port.cc:153] text"
_GLOG = re.compile(r"^([IWEF])\d{4} \d\d:\d\d:\d+\.\d+\s+\d+\s+[\w./+-]+:\d+\]\s?(.*)$")
# TensorFlow before absl logging: "2024-05-01 12:00:00.123456: W tensorflow/x.cc:38] text"
_TF_OLD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: ([IWEF]) [\w./+-]+:\d+\]\s?(.*)$")
# Python logging of TF and absl: "WARNING:tensorflow:From ...", "INFO:absl:..."
_PY_LOG = re.compile(r"^(INFO|WARNING):(tensorflow|absl|keras|tf_keras)\b")

# E lines that TensorFlow prints on every CPU-only or multi-library start, harmless there.
_KNOWN_E = re.compile(
    r"Unable to register cu(DNN|FFT|BLAS) factory"
    r"|failed call to cuInit"
    r"|Could not find cuda drivers"
    r"|TF-TRT Warning"
    r"|computation placer already registered"
    r"|could not open file to read NUMA node"
)
# The lab's own notices on a rank's stderr: lab.cluster.affinity's pinning, and the guard's
# housekeeping (lab.cluster.guard) except its one error, a command it cannot start.
_LAB_NOTICE = re.compile(r"^(distlab: rank pinned to CPU |\[guard\] (?!cannot start))")
# Lines that continue or introduce absl's start-up notices without a level of their own.
_CONTINUATIONS = (
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "To enable the following instructions:",
)


def classify(stream: str, text: str) -> str:
    """One of CLASSES for a line a rank printed on ``stream`` ("stdout" or "stderr")."""
    if PREFIX in text:
        return "record"
    if stream != "stderr":
        return "out"
    if _is_noise(text):
        return "info"
    return "error"


def _is_noise(text: str) -> bool:
    if _LAB_NOTICE.match(text):
        return True
    m = _GLOG.match(text) or _TF_OLD.match(text)
    if m:
        return m.group(1) in "IW" or bool(_KNOWN_E.search(m.group(2)))
    if _PY_LOG.match(text):
        return True
    if text.startswith(_CONTINUATIONS):
        return True
    return bool(_KNOWN_E.search(text)) and "Error" not in text
