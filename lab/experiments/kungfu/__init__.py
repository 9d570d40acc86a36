"""KungFu (OSDI'20, seed 000): adaptive batch (Fig 4), resizing (Fig 7), monitoring overhead
(Fig 8) and scalability (Fig 9) — the room its notebooks import from."""
