"""Exported artifacts: Gaussian embeddings and trained heads as text encoders."""
