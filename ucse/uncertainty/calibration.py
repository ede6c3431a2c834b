"""Post-hoc calibration (temperature and vector scaling) and the calibration metrics that judge it.

torchmetrics 1.9 provides the equal-width binned ECE (``MulticlassCalibrationError``) and it is used for it;
it has no adaptive (equal-mass) ECE, no multiclass NLL or Brier score, no reliability-diagram bins and no
temperature fit, so those few lines are written here. The fits minimise the validation NLL with L-BFGS
in float64 (Guo et al. 2017); torch-uncertainty's scalers would do the same but cannot be imported here
(they pull torchvision).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import torch

from ucse.config.uncertainty import CalibrationMethod, ClassPrior
from ucse.losses.temperature import LOG_T_PRIOR_STD as LOG_T_PRIOR_STD  # re-exported (it lives in losses/)
from ucse.losses.temperature import fit_temperature as fit_temperature
from ucse.losses.temperature import lbfgs_one_thread
from ucse.uncertainty.scores import Array, affine, as_f64

ECE_BINS = 15
log = logging.getLogger(__name__)


@dataclass
class Calibrator:
    """A per-class affine recalibration of logits, ``scale * logits + bias``.

    Attributes:
        method: how it was fitted.
        scale: (C,) a; ``1/T`` in every entry for temperature scaling.
        bias: (C,) b; zeros for temperature scaling, plus the prior's shift (:meth:`for_prior`).
        prior: the class mix the probabilities are for (:meth:`for_prior`).
    """

    method: CalibrationMethod
    scale: torch.Tensor
    bias: torch.Tensor
    prior: ClassPrior = ClassPrior.train

    @classmethod
    def identity(cls, num_classes: int) -> Calibrator:
        """Plain softmax (no calibration)."""
        return cls(
            CalibrationMethod.none,
            torch.ones(num_classes, dtype=torch.float64),
            torch.zeros(num_classes, dtype=torch.float64),
        )

    @property
    def temperature(self) -> float | None:
        """T of temperature scaling (1.0 for none; ``None`` for vector scaling, which has no single T)."""
        if self.method == CalibrationMethod.vector:
            return None
        return float(1.0 / self.scale[0])

    def for_prior(self, prior: ClassPrior, counts: Array, target: Array | None = None) -> Calibrator:
        """This calibration, its probabilities turned from the training mix to ``prior``.

        ``balanced`` subtracts each label's log share of the training rows from its calibrated logit:
        ``p(y | x) / pi(y)``, renormalised, is the posterior under a uniform prior when ``p`` is calibrated
        for the training mix ``pi`` (the label-shift correction of Saerens et al. 2002; the post-hoc logit
        adjustment of Menon et al. 2021). ``target`` adds the log of the given shares too:
        ``p(y | x) * q(y) / pi(y)``, the posterior under the mix ``q``. A bias shift, so it is saved and
        applied like vector scaling's.

        Args:
            prior: ``train`` (returned unchanged), ``balanced`` or ``target``.
            counts: (C,) training rows per label; a label without any counts as one (a finite shift).
            target: (C,) the target mix, positive, adding up to 1 (``prior=target`` only).
        """
        prior = ClassPrior(prior)
        if prior is ClassPrior.train:
            return self
        n = torch.as_tensor(np.asarray(counts), dtype=torch.float64).clamp(min=1.0)  # (C,)
        shift = -torch.log(n / n.sum())
        if prior is ClassPrior.target:
            if target is None:
                raise ValueError("prior=target needs the target mix (uncertainty.calibration.target_shares).")
            shift = shift + torch.log(torch.as_tensor(np.asarray(target), dtype=torch.float64))
        return Calibrator(self.method, self.scale, self.bias + shift, prior)

    def logits(self, logits: Array) -> torch.Tensor:
        """(N, C) calibrated logits."""
        return affine(logits, self.scale, self.bias)

    def probs(self, logits: Array) -> torch.Tensor:
        """(N, C) calibrated probabilities."""
        return torch.softmax(self.logits(logits), dim=-1)


def fit_vector_scaling(logits: Array, labels: Array) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-class scale a and bias b minimising ``NLL(softmax(a * logits + b), labels)``, from temperature.

    Args:
        logits: (N, C) validation logits.
        labels: (N,) class ids.

    Returns:
        ``(a, b)``, both (C,) float64.
    """
    x, y = as_f64(logits), torch.as_tensor(labels).long()
    c = x.shape[1]
    a = torch.full((c,), 1.0 / fit_temperature(x, y), dtype=torch.float64, requires_grad=True)
    b = torch.zeros(c, dtype=torch.float64, requires_grad=True)
    lbfgs_one_thread([a, b], lambda: torch.nn.functional.cross_entropy(x * a + b, y))
    return a.detach(), b.detach()


def fit_calibrator(logits: Array, labels: Array, method: CalibrationMethod, warn: bool = True) -> Calibrator:
    """Fit the calibration ``method`` on validation logits.

    Args:
        logits: (N, C) validation logits.
        labels: (N,) class ids.
        method: temperature, vector or none.
        warn: say when every text is right (no fit); the cross-fitting folds do not: the fit on all the
            held-out rows has said it for them, or the rows as a whole have an error and a fold's silence
            does not mislead.

    Returns:
        The fitted :class:`Calibrator`.
    """
    x = as_f64(logits)
    c = x.shape[1]
    method = CalibrationMethod(method)
    if method == CalibrationMethod.none:
        return Calibrator.identity(c)
    if bool((x.argmax(1) == torch.as_tensor(labels).long()).all()):
        # Every validation text is right: the NLL falls as T -> 0 with no finite minimiser, and the fit
        # would return a degenerate T (0.08 on a 17-row split) that makes every prediction ~certain.
        (log.warning if warn else log.debug)(
            "calibration skipped: the %d held-out texts are all classified correctly, so the %s fit would "
            "only sharpen the probabilities towards certainty (the softmax is kept); more labelled texts (or "
            "a larger data.val_fraction where a validation split is carved) fix this",
            len(x),
            method.value,
        )
        return Calibrator.identity(c)
    if method == CalibrationMethod.temperature:
        t = fit_temperature(logits, labels)
        return Calibrator(
            method, torch.full((c,), 1.0 / t, dtype=torch.float64), torch.zeros(c, dtype=torch.float64)
        )
    a, b = fit_vector_scaling(logits, labels)
    return Calibrator(method, a, b)


def ece(probs: Array, labels: Array, n_bins: int = ECE_BINS) -> float:
    """Expected calibration error of the top label, ``n_bins`` equal-width bins, L1 (torchmetrics).

    Bins are [lo, hi) and a confidence of exactly 1 is a bin of its own (torchmetrics' bucketing);
    :func:`reliability_bins` returns the same bins.

    Args:
        probs: (N, C) probabilities.
        labels: (N,) class ids.
        n_bins: bins on [0, 1].

    Returns:
        ECE in [0, 1].
    """
    # Imported here: torchmetrics imports its audio/image metrics too (~1.5 s), which loading a head for
    # prediction (this module's Calibrator) does not need.
    from torchmetrics.functional.classification import multiclass_calibration_error

    p = as_f64(probs)
    y = torch.as_tensor(labels).long()
    return float(multiclass_calibration_error(p, y, num_classes=p.shape[1], n_bins=n_bins, norm="l1"))


def _bin_of(conf: torch.Tensor, n_bins: int) -> torch.Tensor:
    """(N,) bin index of each confidence exactly as :func:`ece` (torchmetrics) buckets it; 1.0 -> ``n_bins``.

    torchmetrics buckets float32 confidences against float32 edges, so a float64 confidence within ~3e-8 of
    an edge (or of 1) lands in another bin than float64 arithmetic would put it: bucketing the same float32
    values here is what makes the floor and the reliability bins describe the reported ECE's own bins.
    """
    edges = torch.linspace(0, 1, n_bins + 1, dtype=torch.float32)
    return torch.bucketize(conf.to(torch.float32), edges, right=True) - 1


def ece_floor(probs: Array, draws: int = 200, seed: int = 0, n_bins: int = ECE_BINS) -> float:
    """The ECE a *perfectly calibrated* model with these confidences would show on this many texts.

    ECE on a finite set is never 0: each bin's accuracy is a sample mean. Drawing each text's correctness as
    Bernoulli(its confidence), the mean ECE over ``draws`` such draws is what sampling noise alone gives
    (0.023 on 670 texts at 90 % accuracy, 0.012 on 3,080): a measured ECE near it says nothing more.

    Args:
        probs: (N, C) probabilities.
        draws: simulated draws of which texts are right.
        seed: their seed.
        n_bins: :func:`ece`'s bins (the same bucketing: :func:`reliability_bins`).
    """
    conf = as_f64(probs).max(dim=1).values  # (N,) top-label ECE reads only the confidence and right / wrong
    which = _bin_of(conf, n_bins)  # (N,)
    onehot = torch.nn.functional.one_hot(which, n_bins + 1).to(torch.float64)  # (N, B)
    conf_sum = conf @ onehot  # (B,)
    gen = torch.Generator().manual_seed(seed)
    total = 0.0
    for start in range(0, draws, 32):  # (32, N) draws at a time
        right = torch.rand(min(32, draws - start), len(conf), generator=gen, dtype=torch.float64) < conf
        # sum_b n_b / N * |acc_b - conf_b| = sum_b |right in b - confidence in b| / N
        total += float((right.to(torch.float64) @ onehot - conf_sum).abs().sum()) / len(conf)
    return total / draws


def adaptive_ece(probs: Array, labels: Array, n_bins: int = ECE_BINS) -> float:
    """ECE with equal-mass bins (Nguyen & O'Connor 2015): each bin holds ~N/n_bins texts by confidence.

    Equal-width bins leave most bins empty when confidences crowd near 1; equal-mass bins do not. Equal
    confidences always share a bin (a bin's edge moves to the end of a tie it would cut), so the figure does
    not depend on the rows' order.

    Args:
        probs: (N, C) probabilities.
        labels: (N,) class ids.
        n_bins: number of bins (fewer when N is smaller).

    Returns:
        ``sum_b |B_b|/N * |acc_b - conf_b|`` in [0, 1].
    """
    p = as_f64(probs)
    conf, pred = p.max(dim=1)
    correct = (pred == torch.as_tensor(labels).long()).to(torch.float64)
    order = torch.argsort(conf, stable=True)
    c_sorted, n = conf[order], len(order)
    edges = [0]
    for chunk in torch.tensor_split(torch.arange(n), min(n_bins, n)):  # the equal-mass cuts
        # moved to the end of the tie it would cut (c_sorted ascends: the last index of that value, plus one)
        end = int(torch.searchsorted(c_sorted, c_sorted[int(chunk[-1])], right=True))
        if end > edges[-1]:  # a bin emptied by the previous move is dropped
            edges.append(end)
    total = 0.0
    for lo, hi in zip(edges[:-1], edges[1:]):
        idx = order[lo:hi]
        total += len(idx) * abs(float(correct[idx].mean() - conf[idx].mean()))
    return total / n


def reliability_bins(probs: Array, labels: Array, n_bins: int = ECE_BINS) -> dict[str, list[float]]:
    """Per-bin confidence, accuracy and count on the bins :func:`ece` uses (for ``reliability.png``).

    torchmetrics' convention: ``n_bins`` equal-width bins [lo, hi), and a confidence of exactly 1 in a bin of
    its own, [1, 1] (the last entry; zero width), with torchmetrics' float32 bucketing (:func:`_bin_of`).
    ``sum_b count_b / N * |accuracy_b - confidence_b|`` is then the reported ECE, confidences on bin edges and
    within float32 rounding of 1 included (to float32 rounding of the sums: torchmetrics adds in float32).

    Returns:
        ``{"edges": (n_bins + 2,), "confidence": (n_bins + 1,), "accuracy": (n_bins + 1,),
        "count": (n_bins + 1,)}``; empty bins have NaN confidence and accuracy.
    """
    p = as_f64(probs)
    conf, pred = p.max(dim=1)
    correct = (pred == torch.as_tensor(labels).long()).to(torch.float64)
    edges = torch.linspace(0, 1, n_bins + 1, dtype=torch.float64)
    which = _bin_of(conf, n_bins)  # (N,)
    m = n_bins + 1
    count = torch.bincount(which, minlength=m).to(torch.float64)
    nan = torch.full((m,), float("nan"), dtype=torch.float64)
    mean_conf = torch.where(count > 0, torch.bincount(which, conf, m) / count.clamp_min(1), nan)
    acc = torch.where(count > 0, torch.bincount(which, correct, m) / count.clamp_min(1), nan)
    return {
        "edges": [*edges.tolist(), 1.0],
        "confidence": mean_conf.tolist(),
        "accuracy": acc.tolist(),
        "count": count.tolist(),
    }


def nll(probs: Array, labels: Array) -> float:
    """Mean ``-log p_true`` (natural log); probabilities clamped at float64 eps like sklearn's log_loss."""
    p = as_f64(probs)
    y = torch.as_tensor(labels).long()
    return float(-torch.log(p.gather(1, y[:, None]).clamp_min(torch.finfo(torch.float64).eps)).mean())


def brier(probs: Array, labels: Array) -> float:
    """Multiclass Brier score ``mean_n sum_c (p_c - onehot_c)^2`` (Brier 1950), in [0, 2]."""
    p = as_f64(probs)
    onehot = torch.nn.functional.one_hot(torch.as_tensor(labels).long(), p.shape[1]).to(p.dtype)
    return float(((p - onehot) ** 2).sum(dim=1).mean())


def calibration_metrics(probs: Array, labels: Array) -> dict[str, float]:
    """``ece`` (15 equal-width bins), its ``ece_floor``, ``adaptive_ece`` (equal-mass), ``nll``, ``brier``."""
    return {
        "ece": ece(probs, labels),
        "ece_floor": ece_floor(probs),
        "adaptive_ece": adaptive_ece(probs, labels),
        "nll": nll(probs, labels),
        "brier": brier(probs, labels),
    }


def out_of_fold_probs(
    logits: Array,
    labels: Array,
    method: CalibrationMethod,
    folds: int = 5,
    seed: int = 0,
    prior: ClassPrior = ClassPrior.train,
    counts: Array | None = None,
    target: Array | None = None,
) -> torch.Tensor:
    """Each row's probabilities under a calibrator fitted on the other folds (cross-fitting).

    Vector scaling fits 2C parameters: scored on its own fitting rows, its probabilities are optimistic, and a
    conformal quantile taken from them under-covers (0.871 instead of 0.899 at 77 classes, alpha 0.1).
    Out-of-fold probabilities behave like a new text's.

    Args:
        logits: (N, C) validation logits.
        labels: (N,) class ids.
        method: the calibration to cross-fit.
        folds: K.
        seed: fold shuffling.
        prior: each fold's calibrator turned to this class mix (:meth:`Calibrator.for_prior`).
        counts: (C,) training rows per label, for ``prior=balanced`` or ``target``.
        target: (C,) the target mix, for ``prior=target``.

    Returns:
        (N, C) float64 probabilities.
    """
    from sklearn.model_selection import KFold, StratifiedKFold

    x, y = as_f64(logits), np.asarray(labels)
    if len(y) < 2:  # no second row to fit on: KFold(1) raised; the row is scored by a fit on itself
        return fit_calibrator(x, y, method, warn=False).for_prior(prior, counts, target).probs(x)
    out = torch.zeros_like(x)
    # Stratified where every class can be: a fold without a class drives that class's bias to -inf, which
    # L-BFGS chases for all its iterations.
    k = min(folds, len(y))
    split = StratifiedKFold if (np.bincount(y)[np.unique(y)] >= k).all() else KFold
    for tr, te in split(k, shuffle=True, random_state=seed).split(np.zeros(len(y)), y):
        fold = fit_calibrator(x[tr], y[tr], method, warn=False)
        out[te] = fold.for_prior(prior, counts, target).probs(x[te])
    return out
