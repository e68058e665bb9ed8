"""``python -m pace_nb.cli`` is the ``pace-nb`` command (same as ``python -m pace_nb``)."""
import sys

from pace_nb.cli import main

sys.exit(main())
