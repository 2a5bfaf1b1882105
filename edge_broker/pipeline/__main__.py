"""``python -m edge_broker.pipeline``."""

import sys

from .cli import main

sys.exit(main())
