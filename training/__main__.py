import sys

# First, before anything slow is imported: a SIGTERM from here on exits 75 (rerun me), never 143.
from training.preemption import install_early_exit

install_early_exit()

from training.cli import main  # noqa: E402

sys.exit(main())
