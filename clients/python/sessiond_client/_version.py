"""The client's release; it ships with the daemon of the same version."""

__version__ = "0.1.0"
