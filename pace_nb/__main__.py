"""``python -m pace_nb`` is the ``pace-nb`` command."""
import sys

from pace_nb.cli import main

sys.exit(main())
