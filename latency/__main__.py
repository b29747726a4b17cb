"""``python -m latency`` entry point."""
import sys

try:
    from latency.cli import main
except KeyboardInterrupt:  # Ctrl-C while torch and scipy are still importing
    sys.exit(130)

sys.exit(main())
