"""``python -m churn_connector._cli``: the program, as the ``churn-connector`` script runs it
once the package is loaded (the script itself starts in ``churn_connector_cli``, which also
quiets a signal during the imports: ``python -m churn_connector_cli``)."""

import sys

from . import run

sys.exit(run())
