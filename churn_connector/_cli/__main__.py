"""``python -m churn_connector._cli``: the program, as the ``churn-connector`` script runs it."""

import sys

from . import run

sys.exit(run())
