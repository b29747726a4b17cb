"""``python -m latency`` entry point."""
import sys

from latency.cli import main

sys.exit(main())
