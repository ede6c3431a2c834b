"""Seeded, stratified slices (validation, test, subsamples) and the last step every loader shares."""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Callable

import datasets
import numpy as np
from datasets.utils.stratify import stratified_shuffle_split_generate_indices

from ucse.config import DataConfig
from ucse.data.checks import shown
from ucse.data.duplicates import text_key
from ucse.data.excluded import exclude_labels
from ucse.data.tasks import DataError, TaskData

logger = logging.getLogger(__name__)


def check_fraction(value: float, key: str) -> float:
    """Return ``value`` when it is strictly between 0 and 1, else fail naming ``key``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < value < 1.0:
        raise DataError(f"{key}={value!r} must be a fraction strictly between 0 and 1.")
    return float(value)


KEEP_WHOLE_ROWS = 2
"""A label with at most this many rows stays whole on the training side of a carve (when some labels have
more): a test row taken from 2 would leave one, which the validation carve could take too, and the
cross-validated probe needs a row of each label in every fold's training part."""


def check_carvable(
    counts: Counter[int], label_names: list[str], where: str, texts: Counter[int] | None = None
) -> None:
    """Every label needs 2+ rows in data that a validation or test split is carved from (``counts`` per id).

    A label with one row ends up either in train (never evaluated) or only in the carved split (never
    learned: 300 rows with 300 labels trained and reported a test accuracy of 0). Labels with 2 rows are
    kept whole for training by :func:`carve` (warned here, once): learned, but not evaluated. ``texts``
    (distinct texts per label id, when copies are carved together): a label of more rows but at most 2
    texts is kept whole by the grouped carve too, and warned of likewise.

    Raises:
        DataError: naming the labels with a single row (the first ten), how many there are, and the fix.
    """
    single = [label_names[i] for i in sorted(counts) if counts[i] < 2]
    if single:
        listed = shown([repr(n) for n in single])
        raise DataError(
            f"{where}: {len(single)} of {len(counts)} labels have a single row ({listed}), but validation "
            "and test rows are carved from this file, so each label needs at least 2 rows (enough to learn "
            "it and to evaluate it). Add rows for these labels, merge them into others, or remove them "
            "(data.min_label_rows=2 leaves them out)."
        )
    few = [label_names[i] for i in sorted(counts) if counts[i] <= KEEP_WHOLE_ROWS]
    if few and len(few) < len(counts):
        logger.warning(
            "%s: %d of %d labels have only %d rows (%s): kept whole for training, so the carved validation "
            "and test slices hold none of them and the test figures do not cover them. Add rows to evaluate "
            "them.",
            where,
            len(few),
            len(counts),
            KEEP_WHOLE_ROWS,
            shown([repr(n) for n in few]),
        )
    if texts is None or all(n <= KEEP_WHOLE_ROWS for n in texts.values()):
        return  # every label that small: the carve cuts them all, none is kept whole
    copied = [label_names[i] for i in sorted(counts) if counts[i] > KEEP_WHOLE_ROWS >= texts.get(i, 0)]
    if copied:
        logger.warning(
            "%s: %d of %d labels have copies of only %d or fewer distinct texts (%s): kept whole for "
            "training (data.group_copies carves a text with its copies), so the carved validation and test "
            "slices hold none of them and the test figures do not cover them. Add distinct texts to evaluate "
            "them.",
            where,
            len(copied),
            len(counts),
            KEEP_WHOLE_ROWS,
            shown([repr(n) for n in copied]),
        )


def slice_name(key: str, fraction: float) -> str:
    """How warnings name a carved slice: ``"validation slice (data.val_fraction=0.1)"``."""
    kind = "validation" if key.endswith("val_fraction") else "test" if key.endswith("test_fraction") else ""
    return f"{kind + ' ' if kind else ''}slice ({key}={fraction:g})"


def stratified_split(
    ds: datasets.Dataset, test_size: float | int, seed: int, what: str = "slice"
) -> datasets.DatasetDict:
    """Seeded ``train``/``test`` split stratified by ``label`` (plain seeded split when it cannot stratify).

    Stratification is impossible when a class has a single row or ``test_size`` is below the number of
    classes. In the second case the slice takes one row of each of ``test_size`` labels (seeded) that have
    more than :data:`KEEP_WHOLE_ROWS` rows; otherwise the split is random (seeded). A warning says which,
    naming the slice as ``what`` (e.g. ``"test slice (data.test_fraction)"``).
    """
    try:
        return _label_stratified(ds, test_size, seed)
    except ValueError as err:
        labels = ds["label"][:]
        counts = Counter(labels)
        size = test_size if isinstance(test_size, int) else math.ceil(test_size * len(ds))
        spare = sorted(k for k, n in counts.items() if n > KEEP_WHOLE_ROWS)
        if 0 < size < len(counts) and size <= len(spare):
            # As stratified as a slice smaller than the label set can be: one row of each of `size` labels
            # that keep 2+ rows without it (a random slice of 3 rows from 4 labels x 3 took 2 rows of one
            # label, whose last row then could not be cross-validated).
            rng, y = np.random.default_rng(seed), np.asarray(labels)
            chosen = rng.choice(spare, size, replace=False)
            test = np.sort([rng.choice(np.flatnonzero(y == c)) for c in chosen])  # (size,) row ids
            logger.warning(
                # texts, not rows: with data.group_copies a chosen text's copies join it afterwards
                "The %d-text %s cannot hold a text of each of %d labels: it holds one text of %d of them "
                "(seeded, with any copies of it), so the figures on it cover only those.",
                size,
                what,
                len(counts),
                size,
            )
            rest = np.setdiff1d(np.arange(len(ds)), test)
            return datasets.DatasetDict({"train": ds.select(rest), "test": ds.select(test)})
        why = (
            f"the {size}-row {what} cannot hold one row of each of {len(counts)} labels"
            if size < len(counts)
            else err
        )
        logger.warning(
            "Cannot stratify a split of %d rows by label (%s); using a seeded random split that keeps a "
            "row of every label for training.",
            len(ds),
            why,
        )
        # Random, but never a label's last row: one row of each label stays (a plain random slice of 3
        # rows from 4 labels x 2 could take both rows of one label, which then had none to train on).
        rng, y = np.random.default_rng(seed), np.asarray(labels)
        keep = {c: rng.choice(np.flatnonzero(y == c)) for c in counts}
        movable = np.array([i for i in range(len(ds)) if keep[y[i]] != i])
        if 0 < size <= len(movable):
            test = np.sort(rng.choice(movable, size, replace=False))
            rest = np.setdiff1d(np.arange(len(ds)), test)
            return datasets.DatasetDict({"train": ds.select(rest), "test": ds.select(test)})
        return ds.train_test_split(test_size=test_size, seed=seed)


def _label_stratified(ds: datasets.Dataset, test_size: float | int, seed: int) -> datasets.DatasetDict:
    """``ds.train_test_split(test_size=test_size, stratify_by_column="label", seed=seed)``, the same rows.

    datasets 5 reads the stratification column with ``np.asarray`` of a lazy Column, which goes row by row
    (0.84 s of the 1.3 s that loading Banking77 took); here the labels are read in one Arrow call and given to
    the same library function with the same sizes and generator (tested equal to ``train_test_split``).
    Anything but a plain size on a ``ClassLabel`` column goes to ``train_test_split`` itself.
    """
    n = len(ds)
    plain = (isinstance(test_size, float) and 0 < test_size < 1) or (
        isinstance(test_size, int) and not isinstance(test_size, bool) and 0 < test_size < n
    )
    if not plain or not isinstance(ds.features.get("label"), datasets.ClassLabel):
        return ds.train_test_split(test_size=test_size, stratify_by_column="label", seed=seed)
    n_test = math.ceil(test_size * n) if isinstance(test_size, float) else test_size  # as train_test_split
    labels = np.asarray(ds["label"][:])
    rng = np.random.default_rng(seed)
    train, test = next(stratified_shuffle_split_generate_indices(labels, n - n_test, n_test, rng=rng))
    return datasets.DatasetDict({"train": ds.select(train), "test": ds.select(test)})


def stratified_sample(ds: datasets.Dataset, n: int | None, seed: int) -> datasets.Dataset:
    """Stratified, seeded subsample of ``n`` rows (the dataset itself when ``n`` is None or not smaller)."""
    if n is None or n >= len(ds):
        return ds
    if n <= 0:
        raise DataError(f"Sample size {n} must be positive (data.max_train_samples / data.max_eval_samples).")
    return stratified_split(ds, n, seed)["test"]


def carve(
    ds: datasets.Dataset,
    fraction: float,
    key: str,
    seed: int,
    source: str,
    group: bool = True,
    told: str | None = None,
) -> tuple:
    """Split ``ds`` into (rest, slice) with a stratified, seeded ``fraction``-sized slice.

    Labels with at most :data:`KEEP_WHOLE_ROWS` rows stay whole in ``rest`` (unless every label is that
    small); the slice is then ``fraction`` of the other rows. With ``group`` (``data.group_copies``), copies
    of a text (:func:`ucse.data.duplicates.text_key`) land on one side: the slice is carved from one row per
    text, as above, and every copy follows it. Without copies the rows are those of the plain carve.
    ``told``: the settings the log line about copies names (``key`` by default; ``""``: no line, for a
    second carve of rows the first one's line counted).

    Raises:
        DataError: when ``fraction`` is not in (0, 1) or ``ds`` is too small to leave rows on both sides.
    """
    check_fraction(fraction, key)
    cut = lambda d: _carve_rows(d, fraction, key, seed, source)  # noqa: E731
    return split_by_text(ds, group, cut, source, key if told is None else told)


def split_by_text(
    ds: datasets.Dataset,
    group: bool,
    cut: Callable[[datasets.Dataset], tuple[datasets.Dataset, datasets.Dataset]],
    where: str,
    key: str,
) -> tuple[datasets.Dataset, datasets.Dataset]:
    """``cut(ds)`` -> (rest, slice), with every copy of a text on its first copy's side when ``group``.

    ``cut`` splits one row per text (its first copy) and each other copy follows (texts are copies when
    :func:`ucse.data.duplicates.text_key` is equal; their labels may differ). Without copies, or without
    ``group``, it is ``cut(ds)`` itself: the same rows. ``where`` and ``key`` name the data and the setting
    in the log line that says how many rows were kept with their copies (``key`` empty: no line).
    """
    if not group:
        return cut(ds)
    keys = np.array([text_key(t) for t in ds["text"][:]], dtype=object)  # (N,)
    first = np.sort(np.unique(keys, return_index=True)[1])  # (G,) row of each text's first copy, in row order
    if len(first) in (len(ds), 1):  # no copies, or every row a copy of one text
        return cut(ds)
    # A copy in the slice sits at distance ~0 from its twin in training: held-out accuracy, the temperature,
    # the conformal quantile and the out-of-scope threshold all read it as a new text (a review: 16 % of
    # new in-scope texts flagged against the promised 5 % on a file of doubled rows).
    _, part = cut(ds.select(first))
    in_slice = np.isin(keys, np.array([text_key(t) for t in part["text"][:]], dtype=object))  # (N,)
    labels = np.asarray(ds["label"][:])
    if set(labels[~in_slice].tolist()) != set(labels.tolist()):
        # a label whose rows are copies of one or two texts: its texts all went into the slice (the fallback
        # of a carve that cannot stratify), leaving it none to learn from; the plain carve keeps a row of it
        logger.warning(
            "%s: some label's rows are copies of too few texts to keep them on one side of the slice carved "
            "with %s and still train on it: carved row by row instead, so copies of a text can be on both "
            "sides (its scores there are optimistic). Add distinct texts for such labels.",
            where,
            key,
        )
        return cut(ds)
    if key:
        logger.info(
            "%s: %d rows are copies of another text (up to case and punctuation): each text's copies stay on "
            "one side of each slice carved with %s (data.group_copies).",
            where,
            len(ds) - len(first),
            key,
        )
    return ds.select(np.flatnonzero(~in_slice)), ds.select(np.flatnonzero(in_slice))


def _carve_rows(ds: datasets.Dataset, fraction: float, key: str, seed: int, source: str) -> tuple:
    """:func:`carve` of rows, copies or not."""
    what = slice_name(key, fraction)
    if len(ds) < 2:
        raise DataError(
            f"{source} has {len(ds)} usable row(s): too few to carve a slice with {key}={fraction}. "
            "Add rows, or give the split as its own file."
        )
    labels = ds["label"][:]  # one Arrow read (a Column iterates row by row: 0.6 s per 100k rows)
    counts = Counter(labels)
    whole = {k for k, n in counts.items() if n <= KEEP_WHOLE_ROWS}
    if not whole or len(whole) == len(counts):
        parts = stratified_split(ds, fraction, seed, what)
        return parts["train"], parts["test"]
    kept = [i for i, k in enumerate(labels) if k in whole]
    rest = ds.select([i for i, k in enumerate(labels) if k not in whole])
    parts = stratified_split(rest, fraction, seed, what)
    return datasets.concatenate_datasets([parts["train"], ds.select(kept)]), parts["test"]


def assemble(
    name: str,
    train: datasets.Dataset,
    validation: datasets.Dataset,
    test: datasets.Dataset,
    label_names: list[str],
    source: str,
    dropped: dict[str, int],
    data: DataConfig,
    seed: int,
    integer_labels: bool = False,
) -> TaskData:
    """Hold out ``data.exclude_labels``, then subsample (``data.max_*_samples``): the shared last step.

    Args:
        name: task name.
        train: encoded train split (``text`` + ``label`` ClassLabel over ``label_names``).
        validation: encoded validation split.
        test: encoded test split.
        label_names: names of label ids 0..C-1.
        source: where the data came from (for ``TaskData.source``).
        dropped: rows dropped by ``data.drop_bad_rows`` per role.
        data: the data section (exclusion and subsample sizes).
        seed: seed of the excluded-label draw and the subsamples.
        integer_labels: the labels were integer ids in the data (``TaskData.integer_labels``).

    Returns:
        The task, with ``ood`` and ``excluded_labels`` set when labels were held out.
    """
    splits = {"train": train, "validation": validation, "test": test}
    splits, label_names, ood, excluded = exclude_labels(splits, label_names, data.exclude_labels, seed)
    final = datasets.DatasetDict(
        train=stratified_sample(splits["train"], data.max_train_samples, seed),
        validation=stratified_sample(splits["validation"], data.max_eval_samples, seed),
        test=stratified_sample(splits["test"], data.max_eval_samples, seed),
    )
    return TaskData(
        name=name,
        splits=final,
        label_names=label_names,
        source=source,
        dropped=dropped,
        ood=ood,
        excluded_labels=excluded,
        integer_labels=integer_labels,
    )
