"""What a finished run folder holds, in one place.

``config.yaml`` + ``head/config.json`` + ``head/model.safetensors``: ``ucse eval``, ``ucse calibrate`` and
``fit_run_uncertainty`` all ask this module, so "is this a finished run" has one answer and one message.
"""

from __future__ import annotations

from pathlib import Path

from ucse.config.run_layout import RunFolder
from ucse.heads.io import CONFIG_FILE, WEIGHTS_FILE

RUN_FILES = (RunFolder.CONFIG, f"{RunFolder.HEAD}/{CONFIG_FILE}", f"{RunFolder.HEAD}/{WEIGHTS_FILE}")
"""The files every finished run has (the head's profile and metrics.json are optional)."""


def finished_run(run: str | Path) -> Path:
    """``run`` as a Path when it is a finished run folder.

    Raises:
        FileNotFoundError: naming the folder and what is missing, and what to pass instead.
    """
    path = Path(run)
    if not path.is_dir():
        what = "is a file, not a run folder" if path.exists() else "does not exist"
        raise FileNotFoundError(f"run={run} {what}; pass run=<a folder written by ucse train>.")
    for need in RUN_FILES:
        if not (path / need).is_file():
            raise FileNotFoundError(
                f"run={run} is not a finished ucse run: {need} is missing. "
                "Pass run=<a folder written by ucse train>."
            )
    return path
