"""ucse: uncertainty-aware classification heads on frozen embedding models, and UEC ensembles."""

__version__ = "0.1.0"
