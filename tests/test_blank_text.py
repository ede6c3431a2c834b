"""Blank texts: each code point against the Unicode categories, and the Arrow path against Python's."""

from __future__ import annotations

import sys
import unicodedata

import datasets
import pytest

from ucse.backbone.encoder import TextValidationError, validate_texts
from ucse.blank_text import is_blank
from ucse.data.checks import text_problems, text_value_problems
from ucse.data.tasks import DataError
from ucse.data.texts import read_texts

CODE_POINTS = [chr(i) for i in range(sys.maxunicode + 1) if not 0xD800 <= i <= 0xDFFF]


def test_a_blank_character_is_whitespace_or_control_format_or_separator_and_nothing_else():
    cats = {"Cc", "Cf", "Zs", "Zl", "Zp", "Mn", "Me"}
    fillers = set("\u115f\u1160\u3164\uffa0\u2800")  # Hangul fillers, the blank Braille pattern
    blank = [c for c in CODE_POINTS if is_blank(c)]
    assert all(c.isspace() or c in fillers or unicodedata.category(c) in cats for c in blank)
    assert {"\u200b", "\ufeff", "\u00ad", "\x00", "\u3000", "\u2028", "\u0301", "\ufe0f"} | fillers <= set(
        blank
    )
    assert not is_blank("e\u0301") and not is_blank("\u2764\ufe0f")  # a mark on a base letter, an emoji
    assert not any(is_blank(c) for c in "a1.Ω中😀\ue000")  # a private-use glyph may be an icon: kept
    assert is_blank("") and is_blank(" \u200b\t\ufeff") and not is_blank("\u200bok")


def test_the_arrow_kernel_finds_exactly_the_texts_python_calls_blank():
    # one row per code point (its own text), and a few mixtures: RE2's tables differ from Python's
    texts = CODE_POINTS + ["\u200b a", "\u200b\u200c", "", "x"]
    ds = datasets.Dataset.from_dict({"text": texts})
    arrow = {row.index for row in text_problems(ds, "text")}
    python = {row.index for row in text_value_problems(texts, "text")}
    assert arrow == python == {i for i, t in enumerate(texts) if is_blank(t)}


@pytest.mark.parametrize("text", ["\u200b", "\ufeff", "\u00ad", "\x01\x02"])
def test_predict_inputs_refuse_invisible_texts_naming_the_line(tmp_path, text):
    with pytest.raises(TextValidationError, match="only invisible characters"):
        validate_texts(["fine", text])
    f = tmp_path / "in.txt"
    f.write_text(f"fine\n{text}\nalso fine\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"in\.txt line 2 holds only invisible characters \(U\+"):
        read_texts(str(f))


def test_a_txt_input_ending_in_a_dos_end_of_file_mark_is_its_lines(tmp_path):
    f = tmp_path / "dos.txt"
    f.write_bytes(b"refund please\r\nwhere is my card\r\n\x1a")
    assert read_texts(str(f)) == ["refund please", "where is my card"]


def test_the_export_and_mteb_readers_refuse_invisible_texts_naming_the_line(tmp_path):
    from ucse.evaluation.mteb_eval import _read_split
    from ucse.export.export import read_texts as export_texts

    f = tmp_path / "ex.jsonl"
    f.write_text('{"text": "fine", "label": "a"}\n{"text": "\\u200b", "label": "a"}\n')
    with pytest.raises(ValueError, match=r"ex\.jsonl:2: field \"text\" holds only invisible characters"):
        export_texts(f)
    with pytest.raises(ValueError, match=r"ex\.jsonl line 2: 'text' is only invisible characters"):
        _read_split(f, {})
