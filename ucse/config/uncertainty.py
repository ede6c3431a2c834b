"""Typed configuration of the uncertainty profile fitted after training (``uncertainty.*`` in a run's config).

This module imports nothing from ucse: ``ucse.config`` nests :class:`UncertaintyConfig` in
``TrainConfig`` so that ``train.py uncertainty.abstain.target_error=0.05`` is validated like every other key
and recorded in the run's ``config.yaml``, which is what
:func:`ucse.uncertainty.fit.fit_run_uncertainty` reads back.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ucse.config.named_labels import not_a_label, target_shares


class CalibrationMethod(str, Enum):
    """How logits are recalibrated on the validation split (fitted by NLL)."""

    temperature = "temperature"  # one scalar T: softmax(logits / T) (Guo et al. 2017)
    vector = "vector"  # per-class scale and bias: softmax(a * logits + b) (Guo et al. 2017)
    none = "none"  # plain softmax


class ClassPrior(str, Enum):
    """Which class mix the predicted probabilities are for."""

    train = "train"  # the training rows' mix (what the head learned; validation and test are drawn like it)
    balanced = "balanced"  # every label equally likely: logit - log(training share) (Menon et al. 2021)
    target = "target"  # the shares you give (calibration.target_shares): logit + log(target / training share)


class ScoreName(str, Enum):
    """Per-text uncertainty scores (higher = more uncertain for all); see ``ucse.uncertainty.scores``."""

    auto = "auto"  # the lowest validation AURC among AUTO_SCORES (the predictive distribution's own scores)
    msp = "msp"  # 1 - max calibrated softmax probability
    entropy = "entropy"  # entropy of the calibrated softmax (nats)
    sigma = "sigma"  # the paper's mean predicted sigma (needs a variance branch)
    predictive_entropy = "predictive_entropy"  # entropy of the softmax averaged over z ~ N(mu, sigma^2)
    mutual_information = "mutual_information"  # epistemic part of predictive_entropy (BALD)
    mahalanobis = "mahalanobis"  # min over classes of the Mahalanobis distance of mu (Lee et al. 2018)
    density = "density"  # -log p(mu), class Gaussians with one shared covariance on training means


# What ``score=auto`` chooses among: the scores of the head's own predictive distribution, which rank its
# errors. sigma and the distances of mu rank how far a text lies from the training data (out of scope,
# section 4 of docs/RESULTS.md), not whether the head is wrong in scope: their test AURC was 3-10x the
# calibrated MSP's on all four local tasks (section 3), yet on 150 validation texts the density once had the
# lowest validation AURC (0.121 vs MSP 0.156) and was the worst on test (0.208 vs 0.081). A user can still
# name any of them; fewer candidates also leave each a larger share of delta in the abstention's union bound.
AUTO_SCORES = ("msp", "entropy", "predictive_entropy", "mutual_information")


class Uncertifiable(str, Enum):
    """What abstention does when no threshold certifies ``target_error`` on the validation split."""

    answer = "answer"
    abstain = "abstain"


class ConformalMethod(str, Enum):
    """Split-conformal score for prediction sets."""

    aps = "aps"  # adaptive prediction sets (Romano et al. 2020)
    raps = "raps"  # regularised APS (Angelopoulos et al. 2021): penalises long sets


class OodThreshold(str, Enum):
    """How the out-of-scope threshold is set."""

    auto = "auto"  # examples when data.ood_path gives out-of-scope examples, else tpr
    tpr = "tpr"  # keep ``tpr`` of held-out in-scope texts (a split-conformal guarantee)
    examples = "examples"  # best balanced accuracy between held-out in-scope texts and data.ood_path's


class OodScore(str, Enum):
    """Out-of-scope scores (higher = more likely none of the labels); see ``ucse.uncertainty.ood_scores``."""

    mahalanobis = "mahalanobis"  # min class distance, one shared covariance (Lee et al. 2018)
    class_mahalanobis = "class_mahalanobis"  # -log density, one covariance per class (GDA, as in DDU)
    relative_mahalanobis = "relative_mahalanobis"  # class minus background distance (Ren et al. 2021)
    knn = "knn"  # distance to the k-th nearest training vector (Sun et al. 2022)
    joint_knn = "joint_knn"  # the same on [the head's mu, the pooled vector / 2] (ucse.training.neighbours)
    auto = "auto"  # joint_knn up to OodConfig.max_bank_rows training rows, mahalanobis_entropy above
    energy = "energy"  # -logsumexp(logits) (Liu et al. 2020)
    entropy = "entropy"  # entropy of the calibrated softmax
    msp = "msp"  # 1 - max calibrated softmax probability (Hendrycks & Gimpel 2017)
    mahalanobis_entropy = "mahalanobis_entropy"  # sum of the two, each standardised on in-scope validation
    relative_mahalanobis_entropy = "relative_mahalanobis_entropy"  # the same with the relative distance


@dataclass
class CalibrationConfig:
    """Post-hoc calibration of the softmax."""

    method: CalibrationMethod = CalibrationMethod.temperature
    """``temperature`` (one parameter), ``vector`` (2C parameters) or ``none``."""
    prior: ClassPrior = ClassPrior.train
    """The class mix new texts are expected in. ``train``: the training rows' mix (the most accurate on data
    mixed like them). ``balanced``: every label equally likely, for data whose rare labels matter as much as
    the common ones (post-hoc logit adjustment, Menon et al. 2021: each calibrated logit minus the log of its
    label's share of the training rows, the Bayes correction of the posterior to a uniform prior). It raises
    the rare labels' recall and the macro-F1 on imbalanced data and lowers accuracy on data mixed like the
    training rows; abstention, sets and the out-of-scope flag are fitted on the shifted probabilities, and
    the sets' coverage and the flag's keep rate are weighted to every label alike (as under ``target``: a
    label with one held-out row or none can then leave the flag no threshold, which the summary says). Set it
    without retraining: ``ucse calibrate run=<run> uncertainty.calibration.prior=balanced``. ``target``:
    the label shares given in ``calibration.target_shares`` (a known deployment mix, e.g. balanced labelled
    rows for traffic that is 80 % one label); the sets and the out-of-scope flag's keep rate are then
    weighted to that mix, the abstention threshold is certified on the held-out rows as they are."""
    target_shares: Any = None
    """With ``prior=target``: each label's expected share of new texts, one key per label
    (``uncertainty.calibration.target_shares.spam=0.1``) or a mapping (``target_shares={spam: 0.1}``, where
    names YAML reads as booleans need quotes: ``{'yes': 0.2}``). Labels left out share what is left in
    proportion to their training rows; naming every label, the shares must add up to 1."""


@dataclass
class AbstainConfig:
    """Selective prediction: abstain when the default score is above a threshold fitted on validation."""

    target_error: float | None = 0.05
    """Error rate allowed on the texts that are answered; the threshold is the one with the most coverage
    whose error upper bound (Clopper-Pearson at confidence 1 - ``delta``, selection with guaranteed risk,
    Geifman & El-Yaniv 2017) stays below it. ``null`` (and no ``coverage``): never abstain."""
    coverage: float | None = None
    """When set, answer this share of texts instead (guaranteed >= it on exchangeable data); it takes
    precedence over ``target_error``."""
    delta: float = 0.05
    """The error guarantee holds with probability at least 1 - delta over the validation draw."""
    if_uncertifiable: Uncertifiable = Uncertifiable.answer
    """When no threshold can be certified (a small or error-free validation split): ``answer`` saves no
    threshold, so ``abstain`` is false for every text (a warning says so at train and predict time);
    ``abstain`` keeps the guarantee the only way left, abstaining on every text."""


@dataclass
class ConformalConfig:
    """Split-conformal prediction sets calibrated on the validation split."""

    alpha: float = 0.1
    """Miscoverage: a set holds the true label for at least 1 - alpha of texts (marginally)."""
    method: ConformalMethod = ConformalMethod.aps
    """Conformal score: ``aps`` or ``raps``."""
    randomized: bool = True
    """Randomise the last label's inclusion (coverage 1 - alpha on average, not more). Off gives larger sets
    that over-cover."""
    include_top: bool = True
    """Always put the most probable label in the set, so no set is empty (a randomised or a confident set can
    be: the top mass may exceed the quantile). Coverage can only rise; ``false``: the textbook sets."""
    raps_lambda: float = 0.01
    """RAPS penalty per label beyond ``raps_k_reg``."""
    raps_k_reg: int = 1
    """RAPS: set sizes up to this are not penalised."""


@dataclass
class OodConfig:
    """Out-of-scope flag: ``ood`` is true where ``ood_score`` is above a threshold set on in-scope texts."""

    enabled: bool = True
    """Fit the flag after training; off: predict rows carry ``ood: null``."""
    score: OodScore = OodScore.auto
    """Which score. ``joint_knn`` reads the head's mu beside the backbone's pooled unit vector; the other
    feature scores read the pooled vector alone. ``auto`` is ``joint_knn`` up to ``max_bank_rows`` training
    rows and ``mahalanobis_entropy`` above. ``joint_knn`` had the best mean AUROC over the six task x setting
    cases of bench/uncertainty.py (held-out intents, another task's texts): 0.935 against MSP's 0.876 and
    ``mahalanobis_entropy``'s 0.906, ahead of MSP in every case (docs/RESULTS.md section 4)."""
    max_bank_rows: int = 25_000
    """``auto``: the most training rows ``joint_knn`` keeps as its bank (saved with the head, (D + H) float16
    per row: 38 MB for MiniLM-L6 at this cap); above it ``mahalanobis_entropy``, whose statistics do not grow
    with the data."""
    tpr: float = 0.95
    """Share of in-scope texts the threshold keeps (``ood`` false): the threshold is the
    ceil((n + 1) * tpr)-th smallest score of n held-out in-scope texts, so on exchangeable in-scope data at
    least this share is kept on average. Under ``calibration.prior=target`` the held-out texts are weighted
    to the target mix (weighted split conformal; the largest of the per-label quantiles, since a new text's
    label is unknown), so the share holds for in-scope texts mixed like the target; under ``balanced``, for
    texts of every label alike (a rare label's texts, far from its few examples, are then flagged less)."""
    k: int = 1
    """``knn``, ``joint_knn``: which nearest neighbour's distance is the score (1 ranked out-of-scope texts
    better than 10 or 50 in bench/uncertainty.py; at most 50 for ``joint_knn`` after ``head=auto``'s
    refit)."""
    threshold: OodThreshold = OodThreshold.auto
    """``tpr`` keeps ``tpr`` of held-out in-scope texts; ``examples`` (what ``auto`` means when
    ``data.ood_path`` is set) maximises the balanced accuracy (in-scope kept + examples flagged) between the
    held-out in-scope texts and your out-of-scope examples, trading the ``tpr`` guarantee for what your
    examples show."""

    def resolved_score(self, bank_rows: int) -> OodScore:
        """The score ``auto`` stands for with ``bank_rows`` training rows (any other score as it is)."""
        if self.score is not OodScore.auto:
            return self.score
        return OodScore.joint_knn if bank_rows <= self.max_bank_rows else OodScore.mahalanobis_entropy


@dataclass
class DecisionConfig:
    """An operating point for one label: answer it whenever its probability reaches a threshold.

    By default every text gets its most probable label. For a label that matters more than the others (the
    rare ``abusive`` among ``ok`` comments, ``fraud``), a threshold on its calibrated probability trades its
    precision against its recall: texts at or above it get that label, the others their most probable other
    label. Set ``label`` and one of ``precision``, ``recall`` or ``threshold``; the threshold is chosen on the
    held-out rows the profile is calibrated on, which also give its precision and recall (estimates on those
    rows, not guarantees). ``ucse calibrate`` changes it without retraining.
    """

    label: str | None = None
    """The label the operating point is for (its name, or its id for integer labels); ``null``: none."""
    precision: float | None = None
    """Answer the label on as many held-out texts as keeps its held-out precision at or above this."""
    recall: float | None = None
    """Answer the label on as few held-out texts as finds this share of its held-out rows."""
    threshold: float | None = None
    """Answer the label where its calibrated probability is at or above this value, in (0, 1)."""


@dataclass
class UncertaintyConfig:
    """What is fitted after training and saved with the head (``head/calibration.json``)."""

    enabled: bool = True
    """Fit the uncertainty profile after training (``ucse train``); off leaves plain softmax at predict."""
    calibration: CalibrationConfig = field(default_factory=CalibrationConfig)
    """Softmax calibration."""
    abstain: AbstainConfig = field(default_factory=AbstainConfig)
    """Abstention threshold."""
    conformal: ConformalConfig = field(default_factory=ConformalConfig)
    """Prediction sets."""
    ood: OodConfig = field(default_factory=OodConfig)
    """Out-of-scope flag."""
    decision: DecisionConfig = field(default_factory=DecisionConfig)
    """An operating point for one label (a threshold on its probability instead of the most probable)."""
    score: ScoreName = ScoreName.auto
    """Score reported as ``uncertainty`` and used to abstain; ``auto`` picks the lowest validation AURC among
    msp, entropy, predictive_entropy and mutual_information (the others rank distance from the data)."""
    samples: int = 32
    """Monte-Carlo samples of z ~ N(mu, sigma^2) for the predictive scores; 0 uses the closed-form probit
    approximation (predictive_entropy only; mutual_information then is unavailable)."""
    seed: int = 0
    """Seed of the Monte-Carlo samples and of the randomised conformal sets."""


def check_uncertainty_config(cfg: UncertaintyConfig) -> None:
    """Fail before any training on values no fit can use; the message names the key and its range.

    Raises:
        ValueError: naming the first bad ``uncertainty.*`` key.
    """
    checks = [
        (
            "abstain.target_error",
            cfg.abstain.target_error,
            lambda v: v is None or 0 < v < 1,
            "in (0, 1) or null",
        ),
        ("abstain.coverage", cfg.abstain.coverage, lambda v: v is None or 0 < v <= 1, "in (0, 1] or null"),
        ("abstain.delta", cfg.abstain.delta, lambda v: 0 < v < 1, "in (0, 1)"),
        ("conformal.alpha", cfg.conformal.alpha, lambda v: 0 < v < 1, "in (0, 1)"),
        ("conformal.raps_lambda", cfg.conformal.raps_lambda, lambda v: v >= 0, ">= 0"),
        ("conformal.raps_k_reg", cfg.conformal.raps_k_reg, lambda v: v >= 0, ">= 0"),
        ("samples", cfg.samples, lambda v: v >= 0, ">= 0 (0 = probit)"),
        ("ood.tpr", cfg.ood.tpr, lambda v: 0 < v < 1, "in (0, 1)"),
        ("ood.k", cfg.ood.k, lambda v: v >= 1, ">= 1"),
        ("ood.max_bank_rows", cfg.ood.max_bank_rows, lambda v: v >= 1, ">= 1"),
    ]
    for key, value, ok, want in checks:
        if not ok(value):
            raise ValueError(f"uncertainty.{key}={value} is invalid: it must be {want}.")
    check_target_shares(cfg.calibration)
    check_decision(cfg.decision)
    if cfg.samples == 0 and cfg.score == ScoreName.mutual_information:
        raise ValueError("uncertainty.score=mutual_information needs uncertainty.samples >= 1.")


def check_decision(cfg: DecisionConfig) -> None:
    """A label with exactly one of precision, recall or threshold in (0, 1), or none of them.

    Raises:
        ValueError: naming the key, the value and the fix.
    """
    given = {k: v for k in ("precision", "recall", "threshold") if (v := getattr(cfg, k)) is not None}
    key = "uncertainty.decision"
    for k, v in given.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < 1:
            raise ValueError(f"{key}.{k}={v} is invalid: it must be a number in (0, 1).")
    if cfg.label is None and given:
        k = next(iter(given))
        raise ValueError(f"{key}.{k} needs {key}.label=<the label it is for>.")
    if cfg.label is not None and len(given) != 1:
        said = "none" if not given else " and ".join(f"{k}={v}" for k, v in given.items())
        raise ValueError(
            f"{key}.label={cfg.label} needs exactly one of {key}.precision, .recall or .threshold "
            f"(given: {said}); e.g. {key}.precision=0.9."
        )


def decision_label(cfg: DecisionConfig, label_names: Sequence[str] | None, num_classes: int) -> int | None:
    """The id of ``cfg.label`` among the run's labels (``None`` without a rule).

    Raises:
        ValueError: a label the run lacks, naming the key, its labels and the nearest one.
    """
    if cfg.label is None:
        return None
    names = [str(n) for n in label_names] if label_names is not None else [str(i) for i in range(num_classes)]
    if str(cfg.label) in names:
        return names.index(str(cfg.label))
    raise not_a_label(f"uncertainty.decision.label={cfg.label}", str(cfg.label), names)


def check_target_shares(cfg: CalibrationConfig) -> None:
    """Check ``calibration.target_shares`` as far as it can be without the labels.

    A mapping of names to shares in (0, 1], with ``prior=target`` and only then; the names are checked
    against the run's labels once the data are read (:func:`target_shares`).

    Raises:
        ValueError: naming the key, the value and the fix.
    """
    key, shares = "uncertainty.calibration.target_shares", cfg.target_shares
    if ClassPrior(cfg.prior) is not ClassPrior.target:
        if shares is not None:
            raise ValueError(
                f"{key} is set but uncertainty.calibration.prior={ClassPrior(cfg.prior).value}; add "
                f"uncertainty.calibration.prior=target to use the shares, or {key}=null to drop them."
            )
        return
    example = f"{key}.<label>=<share> (one per label, e.g. {key}.refund=0.5)"
    if not isinstance(shares, dict) or not shares:
        raise ValueError(
            f"uncertainty.calibration.prior=target needs {example}: each label's share of new texts."
        )
    for name, share in shares.items():
        if isinstance(name, bool):
            raise ValueError(
                f"{key}: a label was read as the boolean {name}; quote it ({{'yes': 0.2}}) or give one key "
                f"per label ({key}.yes=0.2)."
            )
        ok = isinstance(share, (int, float)) and not isinstance(share, bool) and 0 < share <= 1
        if not ok:
            raise ValueError(f"{key}: {name}={share!r} must be a share in (0, 1], e.g. {key}.{name}=0.5.")
    total = float(sum(shares.values()))
    if total > 1 + 1e-6:
        raise ValueError(f"{key}: the shares add up to {total:.4g}; they must add up to at most 1.")


def check_target_labels(cfg: CalibrationConfig, label_names: Sequence[str]) -> None:
    """With ``prior=target``, the shares checked against the run's labels, before training or refitting.

    Raises:
        ValueError: as :func:`check_target_shares` and :func:`target_shares` do.
    """
    if ClassPrior(cfg.prior) is ClassPrior.target:
        check_target_shares(cfg)
        target_shares(cfg.target_shares, label_names, [1] * len(label_names))  # counts only split the rest


SHARES = "uncertainty.calibration.target_shares"


def recorded_for_calibrate(recorded: UncertaintyConfig, overrides: Sequence[str]) -> UncertaintyConfig:
    """The run's recorded settings that ``ucse calibrate``'s ``overrides`` are merged into.

    The mix as a whole (``target_shares={...}`` or ``=null``) replaces the recorded one, and a prior other
    than ``target`` drops it (the shares apply only to that prior; it was refused while they stood). One
    label's share (``target_shares.<label>=``) changes that label's and keeps the others', which is said.
    """
    base = copy.deepcopy(recorded)
    prior = next(
        (t.split("=", 1)[1] for t in overrides if t.startswith("uncertainty.calibration.prior=")), None
    )
    whole = any(t.startswith(f"{SHARES}=") for t in overrides)
    if whole or (prior is not None and prior.strip().lower() != ClassPrior.target.value):
        base.calibration.target_shares = None
    elif isinstance(base.calibration.target_shares, dict) and any(
        t.startswith(f"{SHARES}.") for t in overrides
    ):
        logging.getLogger(__name__).warning(
            "%s: the run's recorded shares %s are kept beside the ones given; give the whole mix as %s={...} "
            "to replace them.",
            SHARES,
            dict(base.calibration.target_shares),
            SHARES,
        )
    return base
