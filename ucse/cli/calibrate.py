"""``ucse calibrate``: refit a trained run's uncertainty profile with new settings, without retraining.

Usage:
    ucse calibrate run=runs/reviews uncertainty.abstain.target_error=0.1
    ucse calibrate run=runs/reviews uncertainty.abstain.coverage=0.9 uncertainty.conformal.alpha=0.05
    ucse calibrate run=runs/reviews uncertainty.calibration.method=vector data_root=/data/moved
    ucse calibrate run=runs/reviews uncertainty.calibration.prior=balanced   # rare labels count as much
    ucse calibrate run=runs/reviews uncertainty.calibration.prior=target \
        uncertainty.calibration.target_shares.negative=0.2   # new texts: 20 % negative, the rest as trained
    ucse calibrate run=runs/comments uncertainty.decision.label=abusive uncertainty.decision.precision=0.9
        # answer 'abusive' wherever held-out precision stays >= 0.9 (or .recall=0.8, or .threshold=0.3)
    ucse calibrate run=runs/reviews            # the run's own settings (e.g. its profile was never written)

The head's outputs come from the hidden states the run cached, so this takes seconds; the calibration,
default score, abstention threshold and conformal quantile are refitted on the validation split (the
out-of-fold outputs for a head chosen by cross-validation) and replace the old profile in ``head/``; the
run's ``config.yaml`` records the new ``uncertainty`` settings (``target_shares={...}`` replaces the
recorded mix, ``target_shares.<label>=`` changes that label's share and keeps the others', another ``prior``
drops them; the shares in force are printed). Besides ``run=``: ``data_root=`` (the task data
moved since training), ``data_path=`` (the training file moved or was renamed),
``trust_remote_code=true`` (the backbone's own model code; only from you).
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING

from ucse.cli import run_cli
from ucse.cli.help import format_fields, show, wants_help
from ucse.config import ConfigError
from ucse.config.env import quiet_loggers
from ucse.summary import describe_flag, run_label_names

if TYPE_CHECKING:
    from ucse.uncertainty.profile import UncertaintyProfile

OWN_KEYS = ("run", "data_root", "data_path", "trust_remote_code")


def _change(before: str, after: str) -> str:
    """``before -> after``, or ``after (unchanged)``: a long line printed twice read as a change."""
    return f"{after} (unchanged)" if before == after else f"{before} -> {after}"


def help_text() -> str:
    """``ucse calibrate --help``: usage and every ``uncertainty.*`` field."""
    from ucse.config.uncertainty import UncertaintyConfig

    fields = format_fields(UncertaintyConfig, "Settings", prefix="uncertainty.")
    return f"{__doc__.strip()}\n\n{fields}"


def _threshold(profile: UncertaintyProfile) -> str:
    """``target_error 0.05: threshold 0.274 (held-out coverage 87.5 %, error 3.08 %)``."""
    a = profile.abstain
    if a is None:
        return "no abstention"
    if not a.achievable:
        t = "none certifiable"
    else:
        t = "inf" if math.isinf(a.threshold) else f"{a.threshold:.4g}"
    answered = f"held-out coverage {100 * a.val_coverage:.1f} %, error {100 * a.val_error:.2f} %"
    return f"{a.rule} {a.target:g}: threshold {t} ({answered})"


def _flag(profile: UncertaintyProfile) -> str:
    """``mahalanobis, keeps 95 % of in-scope texts: threshold 512.3``."""
    o = profile.ood
    if o is None:
        return "none"
    return f"{describe_flag(o)}: threshold {o.threshold:.4g}"


def _prior(before: UncertaintyProfile, after: UncertaintyProfile) -> str:
    """``train -> balanced (held-out macro-F1 0.791 -> 0.884, accuracy 0.924 -> 0.903, ECE 0.021 -> 0.048)``.

    Towards ``target`` the held-out rows are weighted to the target mix (``info.class_prior.target``).
    """
    old, new = before.calibrator.prior.value, after.calibrator.prior.value
    info = after.info.get("class_prior") or {}
    weighted = new == "target" or old == "target"
    try:
        figures = info["target"] if weighted else info
        a, b = figures[old], figures[new]
        # ECE as the held-out rows are mixed (like the training rows): what a prior costs texts mixed so
        calibrated = f", ECE {a['ece']:.3f} -> {b['ece']:.3f}" if "ece" in a and "ece" in b else ""
        figures = (
            f" (held-out{' rows weighted to the target mix:' if weighted else ''} "
            f"macro-F1 {a['f1_macro']:.3f} -> {b['f1_macro']:.3f}, "
            f"accuracy {a['accuracy']:.3f} -> {b['accuracy']:.3f}{calibrated})"
        )
    except (KeyError, TypeError, ValueError):
        figures = ""
    return f"{old} -> {new}{figures}"


def _mix(run: str, after: UncertaintyProfile, names: list | None) -> str | None:
    """``target mix in force: music 0.6 (given); money 0.27, pets 0.13 (the rest, as trained)``.

    Read back from the run's ``config.yaml`` (what later calls merge into) and the profile's resolved mix, so
    a user sees which shares stand after several calls; ``None`` when the prior is not ``target``. ``names``:
    the run's labels (:func:`ucse.summary.run_label_names`).
    """
    from ucse.config import from_yaml
    from ucse.config.run_layout import RunFolder

    shares = (after.info.get("class_prior") or {}).get("target_shares")
    if after.calibrator.prior.value != "target" or not isinstance(shares, list):
        return None
    given = from_yaml(RunFolder(run).config).uncertainty.calibration.target_shares or {}
    if names is None or len(names) != len(shares):
        names = [str(i) for i in range(len(shares))]
    given = {str(k): float(v) for k, v in dict(given).items()}
    named = ", ".join(f"{k} {v:.3g}" for k, v in given.items())
    rest = [f"{n} {v:.3g}" for n, v in zip(names, shares, strict=True) if str(n) not in given]
    shown = ", ".join(rest[:8]) + (f", ... ({len(rest)} labels)" if len(rest) > 8 else "")
    return f"target mix in force: {named} (given)" + (f"; {shown} (the rest, as trained)" if rest else "")


def main(argv: list[str]) -> int:
    """Parse ``run=`` and ``uncertainty.*`` tokens, refit, print what changed."""
    if wants_help(argv):
        return show(help_text())

    def body() -> int:
        own = {}
        rest = []
        for tok in argv:
            key, _, value = tok.partition("=")
            if key in OWN_KEYS and value:
                own[key] = value
            else:
                rest.append(tok)
        if "run" not in own:
            raise ConfigError("calibrate needs run=<run folder> (written by ucse train).")
        # No field: refit with the run's own settings (a profile lost to a crash, or data that moved).
        trust = own.get("trust_remote_code", "false").lower()
        if trust not in ("true", "false"):
            raise ConfigError(f"trust_remote_code={own['trust_remote_code']}: give true or false.")
        from ucse.pipeline import quiet_lightning
        from ucse.uncertainty.refit import refit_run_profile

        # The data's reading notes (separator, copies, label spellings) were said when the run trained; the
        # rows are checked against the run's, and a change is refused in its own line.
        with quiet_lightning(), quiet_loggers(("ucse.data",), logging.ERROR):
            before, after = refit_run_profile(
                own["run"], rest, own.get("data_root"), trust == "true", own.get("data_path")
            )
        names = run_label_names(own["run"])  # read once: the target mix and the decision name labels
        print(f"run: {own['run']}")
        print(f"class prior: {_prior(before, after)}")
        mix = _mix(own["run"], after, names)
        if mix:
            print(mix)
        print(f"abstention: {_change(_threshold(before), _threshold(after))}")
        print(f"out-of-scope flag: {_change(_flag(before), _flag(after))}")
        from ucse.uncertainty.decision import describe_decision

        rule = _change(describe_decision(before.decision, names), describe_decision(after.decision, names))
        print(f"decision: {rule}")
        print(f"score: {_change(before.score.value, after.score.value)}; profile saved in {own['run']}/head")
        return 0

    return run_cli(body)
