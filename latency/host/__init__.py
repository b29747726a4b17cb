"""Facts about the machine a run measures on: devices and dtypes, cores, the environment
recorded with every result. The first stage that imports torch."""
