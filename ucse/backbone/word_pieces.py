"""How finely a backbone's tokenizer cuts a user's words: the sign that it reads another language than theirs.

An English backbone reads German, Spanish or Turkish words in pieces (all-MiniLM-L6-v2's WordPiece: 1.0-1.05
pieces per word on the four English MTEB tasks, 1.3 on SciFact's biomedical abstracts, 1.5-2.2 on German,
Spanish, French, Italian and Dutch sentences, 3-15 on Turkish, Russian, Chinese and Japanese; docs/RESULTS.md
section 9). A user's trial of German, English and Spanish reviews found what that costs: test accuracy 0.88 /
0.96 / 1.00 by language, and in-scope German texts flagged out of scope. Nothing said why. No language
detector is in the stack, and none is needed: the pieces per word of the backbone's own tokenizer is what
decides how well it reads a text, whatever the language, so that is what is measured and told.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

log = logging.getLogger(__name__)

WORD = re.compile(r"\w+|[^\w\s]", re.UNICODE)
"""A word: a run of letters or digits, or one punctuation mark (one token in every common vocabulary)."""
MIN_WORDS = 3
"""Texts of fewer words are not judged: one rare name in a two-word text would count as a split text."""
SPLIT = 1.5
"""Pieces per word from which a text is read in pieces (English MTEB tasks: under 1.2 on 90 % of texts)."""
SHARE = 0.2
"""The share of judged texts read in pieces from which the run says so (SciFact's abstracts: 0.10)."""
JUDGED_ENOUGH = 20
"""Judged texts enough to settle it: fewer (an encode of a handful) leave the next encode to be measured."""
HEAD_CHARS = 300
"""Characters of each text measured (cut back to a space): within every tokenizer's limit, so none warns."""
SAMPLE = 1000
"""Texts measured at most (a seeded sample of the rest): one tokenizer call, tens of milliseconds."""
ENGLISH = (
    "The weather was warm, so we walked to the station and took the early train into town. "
    "Please check my account: the payment I made last week has not arrived yet. "
    "She asked whether the new phone would be delivered before the end of the month."
)
"""Plain English, measured with the same tokenizer so the message gives its own point of comparison."""


@dataclass(frozen=True)
class WordPieces:
    """How finely a tokenizer cuts a set of texts.

    Attributes:
        judged: texts of at least :data:`MIN_WORDS` words that were measured.
        split: of those, the texts cut into :data:`SPLIT` or more pieces per word.
        mean: pieces per word over the judged texts (the mean of each text's ratio).
        english: pieces per word of :data:`ENGLISH` under the same tokenizer.
        example: the judged text cut finest.
    """

    judged: int
    split: int
    mean: float
    english: float
    example: str


TECHNICAL = re.compile(r"[\d_@/\\=<>{}\[\]#|~$%^*+]|\w[.:]\w|[a-z][A-Z]|^[A-Z]{2,}$")
"""A chunk that is no word of any language: a URL, path, e-mail, version, identifier (``getUserById``,
``user_id``, ``com.acme.Service``), key or acronym. Every vocabulary cuts such chunks into pieces, so a
ticket queue of stack traces read as "another language" (9 of 30 code-heavy English texts over 1.5)."""
ASCII_LETTER = re.compile(r"[A-Za-z]")


def _prose(text: str) -> str:
    """``text`` without symbols or :data:`TECHNICAL` chunks (whitespace-separated, holding an ASCII letter).

    Only chunks with an ASCII letter are left out: a Chinese or Russian sentence with a number in it is
    still measured as it is. Symbols (emoji, arrows: Unicode's ``S*`` categories, and the joiners and
    variation selectors of emoji sequences) are no language: a byte-level tokenizer cuts each emoji into
    several pieces, and a decoder trial's ``😡😡😡`` was its example of "another language".
    """
    kept = [
        c for c in text.split() if not (ASCII_LETTER.search(c) and TECHNICAL.search(c.strip(".,;:!?'\"()")))
    ]
    text = " ".join(kept)
    # a zero-width joiner between emoji goes with them; one inside a word (Indic scripts) stays
    return "".join(
        ch
        for i, ch in enumerate(text)
        if not _symbol(ch)
        and not (ch == "\u200d" and (_symbol(text[i - 1 : i] or " ") or _symbol(text[i + 1 : i + 2] or " ")))
    )


def _symbol(ch: str) -> bool:
    """An emoji or other symbol, or a mark of an emoji sequence (variation selector, keycap, flag tag)."""
    return unicodedata.category(ch)[0] == "S" or ch in "\ufe0e\ufe0f\u20e3" or 0xE0020 <= ord(ch) <= 0xE007F


def _per_word(tokenizer, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(N,) pieces and (N,) words of each text's first :data:`HEAD_CHARS` characters (no special tokens).

    Measured on the text's words (:func:`_prose`): code, URLs and identifiers are left out.
    """
    texts = [_head(_prose(t)) for t in texts]
    pieces = tokenizer(list(texts), add_special_tokens=False)["input_ids"]
    return (
        np.asarray([len(p) for p in pieces], dtype=np.float64),
        np.asarray([len(WORD.findall(t)) for t in texts], dtype=np.float64),
    )


def _head(text: str) -> str:
    """``text`` up to :data:`HEAD_CHARS` characters, cut at its last space there (a word is never halved)."""
    if len(text) <= HEAD_CHARS:
        return text
    cut = text[:HEAD_CHARS]
    space = cut.rfind(" ")
    return cut[:space] if space > 0 else cut  # a text without spaces (Chinese, Japanese) is cut where it is


def word_pieces(tokenizer, texts: Sequence[str], sample: int = SAMPLE, seed: int = 0) -> WordPieces:
    """How finely ``tokenizer`` (a transformers tokenizer) cuts ``texts`` (at most ``sample`` of them)."""
    texts = list(texts)
    if len(texts) > sample:
        pick = np.random.default_rng(seed).choice(len(texts), size=sample, replace=False)
        texts = [texts[i] for i in np.sort(pick)]
    pieces, words = _per_word(tokenizer, texts)
    judged = np.flatnonzero(words >= MIN_WORDS)
    ratio = pieces[judged] / words[judged]  # (J,)
    ref_pieces, ref_words = _per_word(tokenizer, [ENGLISH])
    return WordPieces(
        judged=len(judged),
        split=int((ratio >= SPLIT).sum()),
        mean=float(ratio.mean()) if len(judged) else float("nan"),
        english=float(ref_pieces[0] / ref_words[0]),
        example=texts[int(judged[ratio.argmax()])] if len(judged) else "",
    )


def split_words_message(found: WordPieces, backbone: str) -> str | None:
    """The warning for texts the backbone reads in pieces, or ``None`` when too few are."""
    if found.judged == 0 or found.split < max(5, SHARE * found.judged):
        return None
    example = found.example if len(found.example) <= 70 else found.example[:67] + "..."
    return (
        f"{found.split} of {found.judged} texts (those of {MIN_WORDS} or more words) are cut into "
        f"{SPLIT:g} or more pieces per word by the "
        f"tokenizer of {backbone} ({found.mean:.2f} on average; plain English text: {found.english:.2f}), "
        f"e.g. {example!r}: "
        "it knows those words only in pieces, which usually costs accuracy and can make such texts look out "
        "of scope. If they are not in the backbone's language, a backbone trained on theirs "
        "(backbone.model=<hub id or folder> backbone.name=<a short name>) may read them better. Reported "
        "once per loaded backbone."
    )
