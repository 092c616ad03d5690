"""The ``ecdysis`` command line. Each command group lives in its own module exposing ``register(app)``."""
