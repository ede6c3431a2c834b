"""Property-based fuzz of ``ucse predict``'s input readers (.txt, stdin, .csv, .jsonl, .parquet).

Generated texts hold every character that some reader could take for a line or field break; random bytes,
random truncations and damaged files stand for what a user may pass. The contract: a list with exactly one
text per input line (``.txt``/stdin) or record (tables), in order, or a ``DataError`` (``ValueError``: the CLI
prints it in one line and exits 2). No other exception, never a wrong row count. Derandomised and bounded, so
every run checks the same examples in a few seconds.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import sys
import tempfile
from pathlib import Path

import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ucse.blank_text import is_blank
from ucse.data.tasks import DataError
from ucse.inference.files import read_texts

SETTINGS = settings(
    max_examples=40, derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)
TABLES = settings(SETTINGS, max_examples=15)  # each table read goes through datasets (~50 ms)
BREAKS = "\f\v\r\x1c\x1d\x1e\x85\u2028\u2029\t \"',;{}[]\\"
chars = st.one_of(st.sampled_from(BREAKS), st.characters(codec="utf-8", exclude_characters="\n"))
# One input line: not blank (a visible character: ucse.blank_text), and not ending in \r (a \r before the \n
# is the CRLF line ending).
lines = st.text(chars, min_size=1, max_size=12).filter(lambda t: not is_blank(t) and not t.endswith("\r"))
texts = st.lists(lines, min_size=1, max_size=8)


def _expected_lines(raw: bytes) -> int:
    """The number of lines of a text under the contract: ``\\n`` ends a line; a last line may lack it."""
    return raw.count(b"\n") + (0 if raw.endswith(b"\n") or not raw else 1)


def _same_or_refused_nul(out: list[str] | DataError, texts: list[str], nul_refused: bool) -> None:
    """``out`` is ``texts``, or the ``DataError`` naming a raw NUL byte (the mark of a binary/UTF-16 file)."""
    if nul_refused and any("\x00" in t for t in texts):
        assert isinstance(out, DataError) and "a NUL byte" in str(out), out
    else:
        assert out == texts


def _decodes(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _read(raw: bytes, suffix: str) -> list[str] | DataError:
    if suffix == "-":
        old = sys.stdin
        sys.stdin = io.TextIOWrapper(io.BytesIO(raw))
        try:
            return read_texts("-")
        except DataError as err:
            return err
        finally:
            sys.stdin = old
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"in{suffix}"
        path.write_bytes(raw)
        try:
            return read_texts(str(path))
        except DataError as err:
            return err


@SETTINGS
@given(
    texts=texts,
    ending=st.sampled_from(["\n", "\r\n"]),
    last=st.booleans(),
    source=st.sampled_from([".txt", "-"]),
)
def test_line_inputs_give_back_every_line_whole(texts, ending, last, source):
    raw = (ending.join(texts) + (ending if last else "")).encode()
    _same_or_refused_nul(_read(raw, source), texts, nul_refused=True)


@SETTINGS
@given(raw=st.binary(max_size=64), source=st.sampled_from([".txt", "-"]))
def test_random_bytes_give_one_text_per_line_or_a_data_error(raw, source):
    out = _read(raw, source)
    if isinstance(out, DataError):
        message = str(out)
        assert message.startswith("stdin" if source == "-" else "/") and "\n" not in message
        return
    assert len(out) == _expected_lines(raw) and all(isinstance(t, str) and t.strip() for t in out)


def _table(texts: list[str], suffix: str) -> bytes:
    if suffix == ".jsonl":
        return "".join(
            json.dumps({"text": t, "id": i}, ensure_ascii=bool(i % 2)) + "\n" for i, t in enumerate(texts)
        ).encode()
    if suffix == ".csv":
        buf = io.StringIO()
        writer = csv.writer(buf)
        writer.writerow(["id", "text"])
        writer.writerows(enumerate(texts))
        return buf.getvalue().encode()
    buf = io.BytesIO()
    pd.DataFrame({"text": texts, "id": range(len(texts))}).to_parquet(buf, index=False)
    return buf.getvalue()


@TABLES
@given(texts=texts, suffix=st.sampled_from([".jsonl", ".csv", ".parquet"]))
def test_tables_give_back_every_record_whole(texts, suffix):
    # JSON escapes NUL (\u0000) and Parquet is binary: only a CSV holds the raw byte.
    _same_or_refused_nul(_read(_table(texts, suffix), suffix), texts, nul_refused=suffix == ".csv")


@TABLES
@given(
    texts=texts,
    suffix=st.sampled_from([".jsonl", ".csv", ".parquet"]),
    cut=st.integers(0, 10**6),
    noise=st.binary(max_size=8),
)
def test_damaged_tables_give_their_records_or_a_data_error(texts, suffix, cut, noise):
    raw = _table(texts, suffix)
    cut %= len(raw) + 1
    out = _read(raw[:cut] + noise, suffix)
    if isinstance(out, DataError):
        assert "\n" not in str(out).split(". Expected")[0]  # one line; the format hint may follow
        return
    assert all(isinstance(t, str) and t.strip() for t in out)
    if not noise:  # a cut keeps the records before it whole and in order; the last may lose its end
        k = len(out)
        assert k <= len(texts) and out[: k - 1] == texts[: k - 1] and texts[k - 1].startswith(out[-1])


@settings(SETTINGS, max_examples=8)  # each example loads the tiny run (~0.3 s)
@given(
    raw=st.one_of(
        st.binary(max_size=48),
        texts.filter(lambda t: not any("\x00" in x for x in t)).map(lambda t: "\n".join(t).encode()),
    )
)
def test_predict_from_stdin_exits_0_with_a_row_per_line_or_2_in_one_line(tiny_clf_run, raw):
    from ucse.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    old = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(raw))
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["predict", f"run={tiny_clf_run}", "input=-", "accelerator=cpu"])
    finally:
        sys.stdin = old
    errors = [line for line in err.getvalue().splitlines() if line.startswith("error: ")]
    valid = b"\x00" not in raw and _decodes(raw) and all(x.strip() for x in raw.decode().split("\n"))
    if code == 2 and not valid:
        assert len(errors) == 1 and "Traceback" not in err.getvalue() and not out.getvalue()
        return
    rows = [json.loads(line) for line in out.getvalue().split("\n") if line]
    assert code == 0 and not errors and len(rows) == _expected_lines(raw)
    assert [r["text"] for r in rows] == raw.decode().removesuffix("\n").split("\n")
