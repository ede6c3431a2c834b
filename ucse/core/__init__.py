"""The saved model at the centre of ucse: a frozen backbone + a trained head as one text encoder.

(``encoder``: texts -> mean (N, D), variance (N, D) | None, logits (N, C)) and the Gaussian embeddings it
exports (``gaussian``). ``uncertainty``, ``inference``, ``evaluation`` and ``uec`` build on it; it builds on
``training`` (cached states), ``heads`` and ``backbone``.
"""
