r"""Texts with nothing to read: empty, whitespace, or only invisible characters.

A zero-width space (U+200B), a byte-order mark (U+FEFF), a soft hyphen (U+00AD) or control bytes tokenise
to no word, so the backbone sees only its special tokens and the head answers such a text as confidently
as a real one (a trial: ``"\u200b"`` got a label at 0.76 confidence). Every reader of texts refuses them
as it refuses empty ones.
"""

from __future__ import annotations

import unicodedata

INVISIBLE = frozenset({"Cc", "Cf", "Zs", "Zl", "Zp", "Mn", "Me"})
"""Unicode general categories that show nothing alone: control, format and separator characters, and marks
without a base letter (combining accents, variation selectors: an uncased WordPiece tokenizer drops them)."""
BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")
"""Letters and symbols drawn as nothing: the Hangul fillers and the blank Braille pattern."""

BLANK_RE2 = r"^[\p{Cc}\p{Cf}\p{Z}\p{Mn}\p{Me}\x{115F}\x{1160}\x{3164}\x{FFA0}\x{2800}]*$"
"""The same test for Arrow's RE2 kernels. RE2's Unicode tables may be newer than Python's (they count 7
format characters Python 3.11 leaves unassigned), so it finds candidates and :func:`is_blank` decides."""


def is_blank(text: str) -> bool:
    """Whether ``text`` holds no visible character (empty, whitespace, control, format, lone marks...)."""
    return all(c.isspace() or c in BLANK_LETTERS or unicodedata.category(c) in INVISIBLE for c in text)


def blank_problem(text: str) -> str:
    """What is wrong with a blank text, for a message: ``empty or whitespace-only`` or the invisible ones."""
    if not text.strip():
        return "empty or whitespace-only"
    shown = sorted({f"U+{ord(c):04X}" for c in text if not c.isspace()})
    more = ", ..." if len(shown) > 3 else ""
    return f"only invisible characters ({', '.join(shown[:3])}{more})"
