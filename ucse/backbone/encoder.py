"""The frozen backbone: prompt formatting, length-sorted dynamic batching and token states."""

from __future__ import annotations

import copy
import inspect
import logging
from collections.abc import Iterator, Sequence

import numpy as np
import torch

from ucse.backbone.code_fingerprint import code_fingerprint
from ucse.backbone.loading import load_backbone, model_fingerprint
from ucse.backbone.pooling import check_cls_reads_the_text, first_token_index, pool
from ucse.backbone.precision import effective_precision
from ucse.backbone.tokenized import Tokenized, tokenize
from ucse.backbone.windows import framing, stitch, window_rows
from ucse.backbone.word_pieces import JUDGED_ENOUGH, split_words_message, word_pieces
from ucse.blank_text import blank_problem, is_blank
from ucse.config import BackboneConfig, LongTexts, Precision

log = logging.getLogger(__name__)


class TextValidationError(ValueError):
    """The texts handed to the backbone are not a non-empty list of non-empty strings."""


def validate_texts(texts: Sequence[str]) -> list[str]:
    """Check that ``texts`` is a non-empty sequence of non-empty strings and return it as a list.

    Raises:
        TextValidationError: naming the first bad index and its value.
    """
    if isinstance(texts, str) or not isinstance(texts, Sequence):
        raise TextValidationError(
            f"texts must be a list of strings, got {type(texts).__name__}; wrap a single text as [text]."
        )
    if len(texts) == 0:
        raise TextValidationError("texts is empty; pass at least one non-empty string.")
    for i, t in enumerate(texts):
        if not isinstance(t, str) or not t.strip():
            raise TextValidationError(
                f"texts[{i}] = {t!r} is not a non-empty string; drop or fix that row (a training file's "
                "bad rows are dropped by data.drop_bad_rows=true)."
            )
        if is_blank(t):  # a zero-width space or a BOM alone: the backbone would see no word
            raise TextValidationError(
                f"texts[{i}] = {t!r} holds {blank_problem(t)}, no word to read; drop or fix that row."
            )
        try:  # a lone surrogate (half an emoji, from JSON's "\ud83d" or a cut string) is no Unicode text
            t.encode("utf-8")
        except UnicodeEncodeError as err:
            raise TextValidationError(
                f"texts[{i}] = {t[:60]!r} holds {t[err.start : err.end]!r} at position {err.start}, half of "
                "a character (an unpaired surrogate): it is not valid Unicode text; fix or drop that row."
            ) from None
    return list(texts)


class FrozenBackbone:
    """A frozen HF model plus tokenizer that turns texts into token states.

    Attributes:
        cfg: the backbone config.
        device: where the model runs.
        instruction: task instruction substituted for ``{instruction}`` in ``cfg.prompt``.
        model: the frozen ``PreTrainedModel`` (eval mode, no gradients).
        tokenizer: its tokenizer (padding side and pad token already set).
        fingerprint: stable identity of the weights/tokenizer (see ``model_fingerprint``).
        forward_calls: number of forward passes run so far (lets callers prove a cache hit ran none).
    """

    def __init__(
        self, cfg: BackboneConfig, device: torch.device | str = "cpu", instruction: str = ""
    ) -> None:
        if "{text}" not in cfg.prompt:
            raise ValueError(
                f"backbone.prompt={cfg.prompt!r} has no '{{text}}' placeholder; e.g. 'query: {{text}}'."
            )
        self.cfg = cfg
        self.device = torch.device(device)
        self.instruction = instruction
        self.precision = effective_precision(cfg.precision, self.device)  # fp32 or bf16, never auto
        self.model, self.tokenizer = load_backbone(cfg, self.device)
        self.fingerprint = model_fingerprint(cfg)
        self.code_fingerprint = code_fingerprint(cfg)  # remote code only: in the cache key
        self.layer = self._resolve_layer(cfg.layer)
        self.forward_calls = 0
        params = inspect.signature(self.model.forward).parameters
        self._accepts_position_ids = "position_ids" in params
        self._accepts_token_types = "token_type_ids" in params
        self._eos_suffix = self._eos_to_append()
        check_cls_reads_the_text(cfg, self.model, self.layer, self._accepts_token_types)
        # Never truncate beyond what the model can take (absolute-position tables, tokenizer limit).
        positions = getattr(self.model.config, "max_position_embeddings", None)
        embeddings = getattr(self.model, "embeddings", None)
        pad = getattr(embeddings, "padding_idx", None)
        table = getattr(embeddings, "position_embeddings", None)  # RoBERTa-style: its padding row is pad's
        if isinstance(positions, int) and isinstance(pad, int) and getattr(table, "padding_idx", None) == pad:
            # RoBERTa, XLM-R, MPNet number positions from padding_idx + 1: a 514-row table takes 512 tokens
            # (a checkpoint without a tokenizer limit crashed inside transformers on a 513-token text)
            positions -= pad + 1
        limits = [positions, self.tokenizer.model_max_length]
        self._model_limit = min([x for x in limits if isinstance(x, int) and 0 < x < 10**7], default=None)
        self.max_length = min(cfg.max_length, self._model_limit or cfg.max_length)
        # long_texts=windows: each text up to max_windows windows of max_length tokens, framed alike
        self._frame = framing(self.tokenizer) if cfg.long_texts is LongTexts.windows else None
        self._read_limit = self.max_length
        if self._frame is not None:
            self._read_limit = sum(self._frame) + cfg.max_windows * (self.max_length - sum(self._frame))
        self._told_truncation = self._told_unknown = self._told_split = False
        self.texts_cut = self.texts_unknown = 0  # over every encode that tells: predict's totals

    def _resolve_layer(self, layer: int | None) -> int | None:
        """``backbone.layer`` as an index into ``hidden_states`` (0..L), ``None`` for the last layer.

        Raises:
            ValueError: naming the value and the model's valid range.
        """
        if layer is None:
            return None
        config = self.model.config
        text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
        n = int(text_config.num_hidden_layers)
        if not -(n + 1) <= layer <= n:
            raise ValueError(
                f"backbone.layer={layer} is out of range for {self.cfg.model}, which has {n} layers: use 0 "
                f"(embeddings) to {n} (the last), a negative index from -{n + 1}, or null for the last."
            )
        return layer % (n + 1)

    def with_instruction(self, instruction: str) -> FrozenBackbone:
        """A view of this backbone (same model, no reload) with another task instruction."""
        other = copy.copy(self)
        other.instruction = instruction
        return other

    @property
    def hidden_size(self) -> int:
        """Width H of the token states."""
        config = self.model.config
        text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
        return int(text_config.hidden_size)

    def _eos_to_append(self) -> str:
        """EOS text to append when ``cfg.append_eos`` and the tokenizer does not add EOS itself."""
        if not self.cfg.append_eos:
            return ""
        eos, eos_id = self.tokenizer.eos_token, self.tokenizer.eos_token_id
        if eos is None or eos_id is None:
            raise ValueError(
                f"backbone.append_eos=true but the tokenizer of '{self.cfg.model}' has no eos_token; "
                "set append_eos=false (and pooling to cls or mean)."
            )
        probe = self.tokenizer("probe")["input_ids"]
        return "" if probe and probe[-1] == eos_id else eos

    def format(self, texts: Sequence[str]) -> list[str]:
        """Apply ``cfg.prompt`` (``{instruction}``, ``{text}``) and the EOS suffix to each text."""
        template = self.cfg.prompt.replace("{instruction}", self.instruction)
        return [template.replace("{text}", t) + self._eos_suffix for t in validate_texts(texts)]

    def _encode(self, texts: Sequence[str], tell: bool = True) -> Tokenized:
        """Tokenise (truncated, unpadded), held flat; with an appended EOS, truncation keeps the EOS last."""
        keys = ["input_ids", "attention_mask"] + (["token_type_ids"] if self._accepts_token_types else [])
        tok = tokenize(
            lambda chunk: self.tokenizer(
                self.format(chunk), truncation=True, max_length=self._read_limit, padding=False
            ),
            texts,
            keys,
        )
        lengths = tok.lengths()
        empty = np.flatnonzero(lengths == 0)
        if len(empty):
            raise TextValidationError(
                f"texts[{empty[0]}] = {texts[empty[0]]!r} tokenises to no tokens; drop or fix that row."
            )
        if tell:  # cut / unknown / split texts, once per backbone (off: a re-read of a run's texts)
            self._tell_truncation(lengths)
            self._tell_unknown(tok, texts)
            self._tell_split_words(texts)
        if self._eos_suffix:  # truncated texts lost the appended EOS: it replaces their last token
            tok.flat["input_ids"][tok.offsets[1:] - 1] = self.tokenizer.eos_token_id
        return tok

    def _tell_truncation(self, lengths: np.ndarray) -> None:
        """Warn, once per backbone, that texts reach ``max_length`` tokens: what follows is never read.

        A text is cut silently by the tokenizer; a user training on long documents should know that the
        head sees only their first ``max_length`` tokens (prompt and special tokens included).
        """
        cut = int((lengths >= self._read_limit).sum())
        self.texts_cut += cut
        if not cut or self._told_truncation:
            return
        self._told_truncation = True
        if self._frame is not None:
            more = f"backbone.max_windows={self.cfg.max_windows} windows of {self.max_length} tokens"
        elif self._model_limit and self.max_length < self._model_limit:
            more = f"backbone.max_length={self.cfg.max_length} can go up to the model's {self._model_limit}"
        else:
            more = f"{self.max_length} is the most the model's position table allows"
        if self._frame is None:
            more += "; backbone.long_texts=windows reads long texts whole"
        log.warning(
            # "reach", not "are cut": the tokenizer truncates without saying whether a text was longer
            "%d of %d texts encoded together reach the %d-token limit, where longer ones are cut: what "
            "follows is not read (%s). Reported once per loaded backbone, for the first texts encoded "
            "together that hold any (a large input is encoded in blocks).",
            cut,
            len(lengths),
            self._read_limit,
            more,
        )

    def _tell_unknown(self, tok: Tokenized, texts: Sequence[str]) -> None:
        """Warn, once per backbone, of texts whose tokens are mostly the tokenizer's unknown token.

        A WordPiece vocabulary reads an emoji or a script it lacks as ``[UNK]``: "🙂" and "🚚❓" become the
        same token sequence, so the backbone gives them the same state and the head the same answer (a
        new user's emoji text matched a training row of other emoji exactly). Byte-level tokenizers have no
        unknown token and never warn. Counted in ``texts_unknown`` every time, said once.
        """
        t = self.tokenizer
        unk = t.unk_token_id
        # GPT-2-style tokenizers name EOS/BOS/pad the unknown token too (byte-level: every character is known)
        roles = {t.eos_token_id, t.bos_token_id, t.pad_token_id, t.sep_token_id, t.cls_token_id}
        if unk is None or unk in roles or len(tok) == 0:
            return
        ids = tok.flat["input_ids"]
        special = np.isin(ids, np.asarray(t.all_special_ids, dtype=ids.dtype))
        starts = tok.offsets[:-1]  # every row has >= 1 token (empty rows were refused)
        unknown = np.add.reduceat((ids == unk).astype(np.int64), starts)  # (N,)
        content = np.add.reduceat((~special | (ids == unk)).astype(np.int64), starts)  # (N,)
        mostly = np.flatnonzero((unknown > 0) & (2 * unknown >= content))
        self.texts_unknown += len(mostly)
        if not len(mostly) or self._told_unknown:
            return
        self._told_unknown = True
        log.warning(
            "%d of %d texts encoded together are mostly tokens %s does not know (its unknown token: emoji, "
            "or a script outside its vocabulary), e.g. %r: it reads such texts as near-identical, so their "
            "predictions say little (a backbone whose vocabulary covers them reads them). Reported once per "
            "loaded backbone, for the first texts encoded together that hold any (a large input is encoded "
            "in blocks).",
            len(mostly),
            len(tok),
            self.cfg.name or self.cfg.model,
            texts[int(mostly[0])][:80],
        )

    def _tell_split_words(self, texts: Sequence[str]) -> None:
        """Warn, once per backbone, when many texts hold words its tokenizer knows only in pieces.

        Another language than the backbone's, most often: see :mod:`ucse.backbone.word_pieces`.
        """
        if self._told_split:
            return
        found = word_pieces(self.tokenizer, texts)
        message = split_words_message(found, self.cfg.name or self.cfg.model)
        # judged once on the first texts encoded together that are enough to judge (a run's whole pool)
        self._told_split = bool(message) or found.judged >= JUDGED_ENOUGH
        if message:
            log.warning(message)

    def _prefix_skip(self, tok: Tokenized) -> np.ndarray:
        """(N,) leading tokens of each text that are the prompt before ``{text}`` (0 unless asked to skip).

        Counted per text as the common prefix with the tokenised prompt prefix (a BPE merge across the
        boundary keeps the merged token), and never all of a text's tokens.
        """
        skip = np.zeros(len(tok), dtype=np.int64)
        if not self.cfg.skip_prompt_prefix:
            return skip
        prefix = self.cfg.prompt.replace("{instruction}", self.instruction).split("{text}", 1)[0]
        p_ids = list(self.tokenizer(prefix)["input_ids"]) if prefix else []
        for i in range(len(tok)):
            ids = tok.ids(i)
            k = 0
            while k < min(len(p_ids), len(ids) - 1) and ids[k] == p_ids[k]:
                k += 1
            skip[i] = k
        return skip

    def tokenized(self, texts: Sequence[str]) -> Tokenized:
        """The texts tokenised as :meth:`iter_states` reads them (prompt, EOS, truncation), held flat.

        For a caller that needs the lengths before the pass (the cache sizes its file with them): pass the
        result to both :meth:`token_lengths` and :meth:`iter_states` and the texts are tokenised once.
        """
        return self._encode(texts)

    def token_lengths(self, texts: Sequence[str], tokenized: Tokenized | None = None) -> np.ndarray:
        """(N,) token count of each text after prompt, EOS and truncation (no model run).

        Args:
            texts: N input texts.
            tokenized: :meth:`tokenized` of these texts, if at hand (else they are tokenised here).
        """
        tok = self._encode(texts) if tokenized is None else tokenized
        return tok.lengths() - self._prefix_skip(tok)

    def cut(self, texts: Sequence[str]) -> np.ndarray:
        """(N,) True where a text reaches the token limit: its end may be unread (one that long counts)."""
        return self._encode(texts, tell=False).lengths() >= self._read_limit

    def _forward(self, features: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Run one padded batch; return fp32 hidden (B, T, H) with zeroed pads and mask (B, T)."""
        inputs = {k: v.to(self.device) for k, v in features.items()}
        mask = inputs["attention_mask"].long()  # (B, T)
        if self._accepts_position_ids and bool((mask[:, 0] == 0).any()):
            # Left padding: number real tokens from 0 so absolute-position models see the unpadded positions.
            inputs["position_ids"] = (mask.cumsum(dim=1) - 1).clamp_min(0)
        bf16 = self.precision is Precision.bf16
        with torch.inference_mode(), torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=bf16):
            if self.layer is None:
                hidden = self.model(**inputs, return_dict=True).last_hidden_state  # (B, T, H)
            else:  # (L + 1) x (B, T, H): the embeddings, then every layer's output
                hidden = self.model(**inputs, return_dict=True, output_hidden_states=True).hidden_states[
                    self.layer
                ]
        self.forward_calls += 1
        hidden = hidden.float().masked_fill(mask.unsqueeze(-1) == 0, 0.0)  # (B, T, H)
        return hidden, mask

    def iter_states(
        self, texts: Sequence[str], batch_size: int | None = None, tokenized: Tokenized | None = None
    ) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        """Yield token states batch by batch, longest texts first.

        Batches are padded only to their own longest text (the tokenizer's padding side applies).

        Args:
            texts: N input texts (before the prompt is applied).
            batch_size: texts per forward pass; default ``cfg.batch_size`` (64 on CPU, 512 on a GPU when
                unset), and never more than ``cfg.max_batch_tokens`` padded tokens.
            tokenized: :meth:`tokenized` of these texts, if at hand (else they are tokenised here).

        Yields:
            ``(idx, hidden, mask)``: idx (B,) long positions in ``texts``; hidden (B, T, H) float32 on
            ``self.device`` with zeros at pads; mask (B, T) long, 1 for real tokens.
        """
        bs = int(batch_size or self.cfg.batch_size or (512 if self.device.type == "cuda" else 64))
        if bs < 1:
            raise ValueError(f"batch_size must be >= 1, got {bs}.")
        enc = self._encode(texts) if tokenized is None else tokenized
        if len(enc) != len(texts):
            raise ValueError(f"tokenized holds {len(enc)} texts, not the {len(texts)} given")
        skip = torch.as_tensor(self._prefix_skip(enc))  # (N,)
        lengths = enc.lengths()
        order = np.argsort(-lengths, kind="stable")  # longest first, ties in input order
        start = 0
        while start < len(order):
            # The batch's first text is its longest: cap texts x longest at max_batch_tokens.
            take = max(1, min(bs, int(self.cfg.max_batch_tokens) // self._padded(int(lengths[order[start]]))))
            idx = order[start : start + take]
            start += take
            rows = [enc.row(i) for i in idx]
            if self._frame is not None and int(lengths[idx[0]]) > self.max_length:  # idx[0]: the longest
                windows, *layout = window_rows(rows, *self._frame, self.max_length)
                features = self.tokenizer.pad(windows, padding=True, return_tensors="pt")
                left = self.tokenizer.padding_side == "left"
                hidden, mask = stitch(*self._forward(dict(features)), layout, *self._frame, left_pad=left)
            else:
                features = self.tokenizer.pad(rows, padding=True, return_tensors="pt")
                hidden, mask = self._forward(dict(features))
            if bool(skip.any()):  # hide the prompt prefix: its first skip_i real tokens leave the mask
                pos = torch.arange(mask.shape[1], device=mask.device)  # (T,)
                first = first_token_index(mask).unsqueeze(1)  # (B, 1)
                k = skip[torch.as_tensor(idx)].to(mask.device).unsqueeze(1)  # (B, 1)
                hide = (pos >= first) & (pos < first + k)  # (B, T)
                mask = mask.masked_fill(hide, 0)
                hidden = hidden.masked_fill(hide.unsqueeze(-1), 0.0)
            yield torch.as_tensor(idx, dtype=torch.long), hidden, mask

    def _padded(self, length: int) -> int:
        """Tokens the model reads for a text of ``length`` tokens: a window is padded to ``max_length``."""
        if self._frame is None or length <= self.max_length:
            return length
        frame = sum(self._frame)
        return -(-(length - frame) // (self.max_length - frame)) * self.max_length  # windows x max_length

    def token_states(self, texts: Sequence[str], batch_size: int | None = None) -> list[torch.Tensor]:
        """Per-text token states in input order, pads removed: a list of (T_i, H) float32 CPU tensors."""
        out: list[torch.Tensor] = [torch.empty(0)] * len(validate_texts(texts))
        for idx, hidden, mask in self.iter_states(texts, batch_size):
            keep = mask.bool()
            for b, i in enumerate(idx.tolist()):
                out[i] = hidden[b, keep[b]].cpu()  # (T_i, H)
        return out

    def pooled(self, texts: Sequence[str], batch_size: int | None = None) -> torch.Tensor:
        """(N, H) float32 CPU sentence vectors pooled with ``cfg.pooling``, in input order."""
        out = torch.empty(len(validate_texts(texts)), self.hidden_size)
        for idx, hidden, mask in self.iter_states(texts, batch_size):
            out[idx] = pool(hidden, mask, self.cfg.pooling).cpu()
        return out
