"""Where the backbone and head run: the ``device`` config value as a ``torch.device``.

Its own module, importing only torch, so that loading a trained head for prediction
(``ucse.inference.classifier``) does not import the training stack (Lightning, scikit-learn, ``datasets``)
that ``ucse.training.run`` needs.
"""

from __future__ import annotations

import torch

from ucse.config import ConfigError, Device


def resolve_device(device: Device) -> torch.device:
    """``auto`` -> CUDA when available, else CPU; ``cuda`` without a GPU fails clearly (a ``ConfigError``)."""
    if device == Device.cuda and not torch.cuda.is_available():
        raise ConfigError(
            "accelerator=cuda but no CUDA GPU is visible; use accelerator=auto or accelerator=cpu."
        )
    if device == Device.cpu or (device == Device.auto and not torch.cuda.is_available()):
        return torch.device("cpu")
    return torch.device("cuda")
