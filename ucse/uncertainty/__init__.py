"""Uncertainty a user can act on: scores, calibration, selective prediction, conformal sets, OOD metrics.

Sits above ``training`` (it may import training, heads, backbone, data) and below ``evaluation`` and
``inference``, which both use it. Modules, one concept each:

- ``scores``: per-text uncertainty scores from (mean, var, logits); higher = more uncertain.
- ``density``: class-conditional Gaussians on mu (Mahalanobis distance, negative log density).
- ``calibration``: temperature / vector scaling, ECE (equal-width and adaptive), NLL, Brier.
- ``selective``: risk-coverage, AURC / E-AURC, abstention thresholds with a guarantee.
- ``conformal``: split-conformal APS / RAPS prediction sets.
- ``ood``: AUROC and FPR at 95 % TPR of a score separating in- from out-of-distribution texts.
- ``sigma``: the paper's sigma view (Sec. 5.8): sigma bins and accuracy-rejection curves.
- ``profile``: the fitted profile saved with a head, and ``load_uncertainty_profile(head_dir)``.
- ``fit``: fit a profile on a finished run's validation split and save it into ``run/head``.

Nothing is imported here eagerly: ``ucse.config`` imports ``ucse.config.uncertainty``, and the package must
stay importable from it without pulling torch-heavy modules or creating an import cycle.
"""
