"""The serving system without a model: queueing theory, the discrete-event simulator, its
calibration to a measured run, capacity planning and what-if questions. No torch."""
