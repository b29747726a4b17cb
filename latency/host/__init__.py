"""Facts about the machine a run measures on: devices and dtypes, cores, the environment
recorded with every result (ARCHITECTURE §4.8). The first stage that imports torch."""
