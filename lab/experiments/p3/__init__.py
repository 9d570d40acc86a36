"""P3 (SysML'19, seed 001): priority-based parameter propagation on a parameter server,
throughput vs bandwidth and one iteration's timeline — the room its notebooks import from."""
