"""Inference: a run as a classifier with uncertainty; the files ``ucse predict`` reads and writes."""

from ucse.inference.classifier import UcseClassifier, resolve_head_dir

__all__ = ["UcseClassifier", "resolve_head_dir"]
