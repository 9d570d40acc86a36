"""The KungFu/Horovod/parameter-server benchmark (seed 003): sync and async SGD systems
compared on equal terms — the room its notebooks import from."""
