"""toporender: render topology-aware gang-scheduler objects from workflows kept in Git."""

__version__ = "0.1.0"
