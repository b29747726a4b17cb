"""``python -m latency`` entry point (the console script ``latency`` calls the same main)."""
import sys

try:
    from latency.cli.main import main
except KeyboardInterrupt:  # Ctrl-C before the command line is even read
    sys.exit(130)

sys.exit(main())
