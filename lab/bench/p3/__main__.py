"""``python -m lab.bench.p3``: see lab.bench.p3.run."""

import sys

from lab.bench.p3.run import main

sys.exit(main())
