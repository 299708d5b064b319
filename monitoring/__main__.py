import sys

from monitoring.cli import main

sys.exit(main())
