"""``ucse predict``'s readers and writer without a model: one row per input line, one-line errors."""

from __future__ import annotations

import csv
import errno
import io
import json
import subprocess
import sys

import pytest

from ucse.data.tasks import DataError
from ucse.inference.files import check_output, read_texts, write_predictions

# Characters str.splitlines() treats as line breaks but a text file line may hold.
INNER_BREAKS = ["\f", "\v", "\r", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


def _texts() -> list[str]:
    return [f"left{c}right {i}" for i, c in enumerate(INNER_BREAKS)]


@pytest.mark.parametrize("ending", ["\n", "\r\n"])
@pytest.mark.parametrize("last", ["", "newline", "blank lines"])  # trailing blank lines: an editor's
def test_a_txt_file_gives_one_text_per_line_whatever_the_line_holds(tmp_path, ending, last, caplog):
    texts = _texts()
    path = tmp_path / "in.txt"
    tail = {"": "", "newline": ending, "blank lines": ending + ending + "  " + ending}[last]
    path.write_bytes((ending.join(texts) + tail).encode())
    assert read_texts(str(path)) == texts
    # an editor's newlines pass unsaid; a last line of spaces gets no row, which is said (a trial saw 2 lines
    # in and 1 row out, where one such line inside the file fails)
    said = "what follows the last text holds only spaces or invisible characters: no row is written for it"
    assert (said in caplog.text) == (last == "blank lines")


@pytest.mark.parametrize("first", ["msg", "MSG ", "text"])
def test_a_header_line_in_a_txt_file_is_warned_and_kept(tmp_path, caplog, first):
    # a spreadsheet column exported as text kept its header: "msg" was answered and offered to label (a trial)
    path = tmp_path / "pool.txt"
    path.write_text(f"{first}\nbins not collected\nbroken streetlight\n")
    assert read_texts(str(path), "msg") == [first, "bins not collected", "broken streetlight"]
    assert f"line 1 is {first!r}, the name of a text column: a header?" in caplog.text
    caplog.clear()
    path.write_text("message\nmsg\n")  # the word elsewhere, or another first line: nothing said
    assert read_texts(str(path), "msg") == ["message", "msg"] and "header" not in caplog.text


def test_a_blank_line_between_texts_is_still_refused(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("a\n\nb\n\n")
    with pytest.raises(ValueError, match="line 2 is blank"):
        read_texts(str(path))


def test_csv_cells_hold_the_label_names_as_written(tmp_path):
    # probs / set were JSON with \u escapes, so their keys did not match the label column beside them
    out = tmp_path / "p.csv"
    write_predictions(
        [{"text": "x", "label": "Billing 💳", "probs": {"Billing 💳": 0.9, "log in": 0.1}}], str(out)
    )
    row = next(csv.DictReader(out.open(encoding="utf-8")))
    assert row["label"] in json.loads(row["probs"]) and "Billing 💳" in row["probs"]


def test_stdin_gives_one_text_per_line_whatever_the_line_holds(monkeypatch):
    texts = _texts()
    # A real stdin: bytes under a text layer that would translate every bare \r into a line break.
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("\n".join(texts).encode())))
    assert read_texts("-") == texts


def test_a_leading_byte_order_mark_is_not_part_of_the_first_text(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes("\ufeffhello\nworld\n".encode())
    assert read_texts(str(path)) == ["hello", "world"]


@pytest.mark.parametrize("stdin", [None, "closed"])
def test_a_closed_stdin_is_one_clear_error(monkeypatch, stdin):
    if stdin == "closed":
        stdin = io.TextIOWrapper(io.BytesIO(b"x"))
        stdin.close()
    monkeypatch.setattr(sys, "stdin", stdin)
    with pytest.raises(DataError, match=r"input=-: stdin is closed; pipe the texts in"):
        read_texts("-")


def test_invalid_utf8_on_stdin_names_the_line_and_byte(monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"fine\nbad \xff here\n")))
    with pytest.raises(
        DataError, match=r"^stdin line 2: byte 0xff at column 5 is not UTF-8\. Save the file as"
    ):
        read_texts("-")


def test_invalid_utf8_in_a_txt_file_names_the_file_and_line(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b"fine\nstill fine\n\xc3\x28 broken\n")
    with pytest.raises(DataError, match=rf"^{path} line 3: byte 0xc3 at column 1 is not UTF-8"):
        read_texts(str(path))


def test_a_utf16_txt_file_without_bom_is_refused_not_read_as_garbage(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes("hello\nworld\n".encode("utf-16-le"))  # valid UTF-8 bytes, every other one NUL
    with pytest.raises(DataError, match=rf"^{path} line 1: a NUL byte at column 2; is it a binary or UTF-16"):
        read_texts(str(path))


def test_an_unwritable_out_folder_fails_before_any_work(tmp_path, monkeypatch):
    def read_only(*args, **kwargs):  # what the kernel answers on a read-only mount (root ignores chmod)
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr("ucse.inference.files.tempfile.TemporaryFile", read_only)
    message = rf"out=.*: folder {tmp_path} is not writable \(Read-only file system\)"
    with pytest.raises(DataError, match=message):
        check_output(str(tmp_path / "p.jsonl"))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_a_full_disk_while_writing_leaves_nothing_and_says_so(tmp_path, monkeypatch, suffix):
    rows = [{"text": "a", "label": "x", "probs": {"x": 1.0}}]
    out = tmp_path / f"p{suffix}"

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("ucse.atomic.os.fsync", full)
    message = r"could not write the predictions \(No space left on device\); nothing was written"
    with pytest.raises(DataError, match=message):
        write_predictions(rows, str(out))
    assert list(tmp_path.iterdir()) == []  # neither the file nor its temporary sibling


def test_a_link_to_nowhere_at_out_counts_as_an_existing_file(tmp_path):
    # before, the whole input was predicted and the write then blamed "another process"
    (tmp_path / "dang.jsonl").symlink_to(tmp_path / "nowhere.jsonl")
    with pytest.raises(DataError, match="already exists; nothing was written"):
        check_output(str(tmp_path / "dang.jsonl"), overwrite=False)


def test_stdout_closed_is_one_clear_error_before_any_work(monkeypatch):
    monkeypatch.setattr(sys, "stdout", None)  # what Python gives a process started with `>&-`
    with pytest.raises(DataError, match="standard output is closed"):
        check_output("-", overwrite=False)


def test_a_reader_that_stops_early_ends_the_output_quietly(tmp_path):
    # `ucse predict ... out=- | head -2`: exit 0 and no "Broken pipe" error
    code = (
        "import sys; from ucse.inference.files import write_predictions; "
        "write_predictions([[{'text': 'x' * 50, 'label': 'a'}] * 1000] * 20, '-'); "
        "print('done', file=sys.stderr)"
    )
    proc = subprocess.run(
        f'{sys.executable} -c "{code}" | head -c 10 > /dev/null; echo ${{PIPESTATUS[0]}}',
        shell=True,
        executable="/bin/bash",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.stdout.strip() == "0" and "done" in proc.stderr, proc.stderr
    assert "Broken pipe" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_no_rows_write_an_empty_file(tmp_path, suffix):
    from ucse.inference.files import write_predictions

    out = tmp_path / f"p{suffix}"
    write_predictions([], str(out))  # a CSV took its header from rows[0]: IndexError
    assert out.read_text() == ""
    write_predictions([[], [{"text": "a", "label": "x"}], []], str(tmp_path / f"q{suffix}"))
    assert "a" in (tmp_path / f"q{suffix}").read_text()
