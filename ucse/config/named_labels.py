"""Labels that ``uncertainty.*`` settings name (a target mix's shares, a decision's label), read for a run."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any


def not_a_label(said: str, value: str, names: Sequence[str]) -> ValueError:
    """The error for ``value``, which ``said`` (``key: 'x'`` or ``key=x``) gives and the run lacks.

    It names the run's first 20 labels and the nearest one (``ucse.config.build.did_you_mean``'s rule; not
    imported: ``ucse.config.build`` imports the settings that use this).
    """
    shown = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "")
    close = difflib.get_close_matches(value, list(names), n=1, cutoff=0.5)
    hint = f" Did you mean '{close[0]}'?" if close else ""
    return ValueError(f"{said} is not one of the run's {len(names)} labels ({shown}).{hint}")


def target_shares(spec: Any, label_names: Sequence[str], counts: Sequence[int]) -> list[float]:
    """The target mix of ``calibration.target_shares``, in label-id order, adding up to 1.

    Args:
        spec: ``{label name: share}`` (checked by :func:`check_target_shares`); integer keys name the labels
            ``"0"``, ``"1"``...
        label_names: the run's labels, in id order.
        counts: training rows per label, in id order: labels left out of ``spec`` share the rest in
            proportion (a label without rows counts as one).

    Raises:
        ValueError: an unknown label, shares that leave nothing for the labels left out, or, naming every
            label, shares that do not add up to 1 (each message names the key and the fix).
    """
    key = "uncertainty.calibration.target_shares"
    names = [str(n) for n in label_names]
    given = {str(k): float(v) for k, v in spec.items()}
    unknown = [k for k in given if k not in names]
    if unknown:
        raise not_a_label(f"{key}: {unknown[0]!r}", unknown[0], names)
    rest = [i for i, name in enumerate(names) if name not in given]
    total = sum(given.values())
    if not rest:
        if abs(total - 1.0) > 1e-3:
            raise ValueError(f"{key}: every label is named and the shares add up to {total:.4g}, not 1.")
        return [given[name] / total for name in names]
    if total >= 1.0 - 1e-6:
        raise ValueError(
            f"{key}: the named labels take {total:.4g} of the mix, leaving nothing for the {len(rest)} "
            f"left out (e.g. {names[rest[0]]!r}); lower the shares or name every label."
        )
    left = [max(int(counts[i]), 1) for i in rest]
    out = [given.get(name, 0.0) for name in names]
    for i, n in zip(rest, left):
        out[i] = (1.0 - total) * n / sum(left)
    return out
