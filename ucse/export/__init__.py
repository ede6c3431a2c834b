"""Exporting a run's Gaussian embeddings of texts or a split (``ucse export``); a leaf nothing imports."""
