"""fleet: drain an issue tracker onto worker machines, one named supervised unit per issue."""

__version__ = "0.1.0"
