"""CM-DARE (ICDCS'20, seed 004): training on transient servers — speed models, parameter-
server bottleneck, revocations and lifetimes — the room its notebooks import from."""
