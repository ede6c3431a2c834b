"""Bad files fail with one DataError naming the file, the 1-based line (or row) and what was expected."""

import json

import datasets
import pandas as pd
import pytest
from toy_tasks import own_rows, write_rows

from ucse.data import DataError, load_task_data
from ucse.data.files import read_file

GOOD = b'{"text": "a b", "label": "x"}\n{"text": "c d", "label": "y"}\n'

CASES = {
    # name: (file name, bytes, substrings the message must hold)
    "jsonl syntax error": (
        "d.jsonl",
        GOOD + b'{"text": "e", label: "x"}\n',
        ["line 3: JSON syntax error: Expecting property name enclosed in double quotes (column 15)"],
    ),
    "jsonl non-object line": ("d.jsonl", GOOD + b"\n[1, 2]\n", ["line 4: expected one JSON object", "array"]),
    "jsonl string line": (
        "d.jsonl",
        b'"just text"\n' + GOOD,
        ["line 1: expected one JSON object", "a string"],
    ),
    "jsonl NaN literal": ("d.jsonl", GOOD + b'{"text": NaN, "label": "x"}\n', ["line 3"]),
    "jsonl 0 bytes": ("d.jsonl", b"", ["is empty (0 bytes)", "one JSON object per line"]),
    "jsonl blank only": ("d.jsonl", b"\n  \n\t\n", ["holds only blank lines"]),
    "jsonl not utf-8": (
        "d.jsonl",
        GOOD + b'{"text": "caf\xe9", "label": "x"}\n',
        ["line 3: byte 0xe9", "UTF-8"],
    ),
    "jsonl empty text": ("d.jsonl", GOOD + b'{"text": "  ", "label": "x"}\n', ["line 3: 'text' is empty"]),
    "jsonl missing label": ("d.jsonl", GOOD + b'\n{"text": "e f"}\n', ["line 4: 'label' is missing"]),
    "jsonl number text": (
        "d.jsonl",
        GOOD + b'{"text": 5, "label": "x"}\n',
        ["line 3: 'text' is not a string (int)"],
    ),
    "jsonl duplicate key": (  # Arrow: "Trailing data at position 42", no line
        "d.jsonl",
        GOOD + b'{"text": "a b", "text": "c", "label": "x"}\n',
        ["line 3: the key 'text' appears twice in one object (keep one)"],
    ),
    "json syntax error": (
        "d.json",
        b'[{"text": "a", "label": "x"},\n {"text": "b", "label": "y"]\n',
        ["line 2"],
    ),
    "jsonl nested too deeply": (  # a RecursionError before, out of the reader's own diagnosis
        "d.jsonl",
        GOOD + b'{"text": ' + b"[" * 100_000 + b"]" * 100_000 + b', "label": "x"}\n',
        # the object opens depth 1 at column 1, the brackets from column 10: depth 1,000 at 10 + 998
        ["line 3: JSON syntax error: nested deeper than the JSON reader can follow (column 1008)"],
    ),
    "json nested too deeply": ("d.json", b"[" * 100_000 + b"]" * 100_000, ["nested deeper than"]),
    "json array of non-objects": ("d.json", b'[{"text": "a", "label": "x"}, 3]', ["item 2", "a number"]),
    "json column object": (
        "d.json",
        b'{"text": ["a", "b"], "label": ["x", "y"]}',
        ["one object of column lists"],
    ),
    "json empty array": ("d.json", b"[]", ["d.json"]),
    "csv header only": ("d.csv", b"text,label\n", ["header row but no data rows"]),
    "csv 0 bytes": ("d.csv", b"", ["is empty (0 bytes)", "header row"]),
    "csv blank only": ("d.csv", b"\n\n   \n", ["holds only blank lines"]),
    "csv ragged row": ("d.csv", b"text,label\na,x\nb,y,z\n", ["line 3: 3 fields where the header has 2"]),
    "csv open quote": ("d.csv", b'text,label\na,x\n"b,y\nc,x\n', ["line 3: a quoted field is never closed"]),
    "csv not utf-8": ("d.csv", b"text,label\na,x\n\nb\xff,y\n", ["line 4: byte 0xff at column 2"]),
    "csv empty text": ("d.csv", b"text,label\na,x\n\n,y\n", ["line 4: 'text' is missing"]),
    "csv whitespace text": (
        "d.csv",
        b'text,label\na,x\n"  ",y\n',
        ["line 3: 'text' is empty or whitespace-only"],
    ),
    "csv invisible text": (  # a zero-width space and a byte-order mark: no word for the backbone
        "d.csv",
        "text,label\na,x\n\u200b\ufeff,y\n".encode(),
        ["line 3: 'text' is only invisible characters (U+200B, U+FEFF)"],
    ),
    "csv missing label": ("d.csv", b'text,label\na,x\n"multi\nline",y\nc,\n', ["line 5: 'label' is missing"]),
    "csv missing column": ("d.csv", b"sentence,label\na,x\n", ["no column 'text'", "['sentence', 'label']"]),
    "semicolon tsv": ("d.tsv", b"text;label\na;x\n", ["['text;label']", "other than commas"]),
    "semicolon csv ragged row": (
        "d.csv",
        b"text;label\na, b;x\nc;y;z\n",
        ["line 3: 3 fields where the header has 2"],
    ),
    "columns guessed": (
        "d.csv",
        b"Beschreibung;Kategorie\nprinter jams again;Drucker\nVPN drops;VPN\ntoner low on floor 2;Drucker\n",
        [
            "no column 'text'",
            "looks like data.text_column=Beschreibung data.label_column=Kategorie (2 values).",
        ],
    ),
    "columns guessed, a version column beside": (
        "d.csv",
        b"review,kind,app_version\ncrashes on start,bug,4.2\nadd dark mode,feature,4.2\n"
        b"freezes when saving,bug,4.1\nplease add export,feature,4.2.1\nlogin loops,bug,4.2\n",
        [
            "looks like data.text_column=review data.label_column=kind",
            "(2 values; other columns whose values repeat: app_version (3)).",  # each with its count
        ],
    ),
    "columns guessed, the label column by its name": (  # a help-desk export: Channel was guessed, not Intent
        "d.csv",
        b"Ticket ID;Created;Channel;Customer Message;Intent\n"
        + b"".join(
            b"%d;2026-11-%02d 10:%02d;%s;%s number %d;%s\n" % (i, i % 28 + 1, i, ch, msg, i, intent)
            for i, (ch, msg, intent) in enumerate(
                [
                    (b"app", b"bike will not unlock", b"unlock"),
                    (b"web", b"refund for my ride", b"refund"),
                    (b"app", b"where is the nearest station", b"station"),
                    (b"email", b"card was charged twice", b"payment"),
                ]
                * 3
            )
        ),
        [
            "looks like 'data.text_column=Customer Message' data.label_column=Intent",
            "(4 values; other columns whose values repeat: Channel (3)).",  # not Created, Ticket ID: distinct
        ],
    ),
    "columns guessed, labels longer than the texts": (  # a catalog: the category paths were the "text"
        "d.csv",
        b"title,category\n"
        + b"".join(
            b'%s %d,"%s"\n' % (title, i, cat)
            for i, (title, cat) in enumerate(
                [
                    (b"Acme tee XL", b"Clothing, Shoes & Accessories > Men's > T-Shirts"),
                    (b"LED bulb E27", b"Home & Garden > Lights, Lamps & Bulbs"),
                    (b"Trail runner 44", b"Clothing, Shoes & Accessories > Men's > Running Shoes"),
                ]
                * 2
            )
        ),
        ["looks like data.text_column=title data.label_column=category"],
    ),
    # a score column named as the label: a CSV's 3.5 was a label name, the same in JSON failed row by row
    "csv fractional number labels": (
        "d.csv",
        b"text,label\na,1.5\nb,3.5\nc,4\nd,1.5\n",
        ["d.csv line 2: every label in 'label' is a number and some are not whole (1.5)", "a score?"],
    ),
    "jsonl fractional number labels": (
        "d.jsonl",
        b'{"text": "a", "label": 1.5}\n{"text": "b", "label": 3}\n{"text": "c", "label": 3.5}\n',
        ["d.jsonl line 1: every label in 'label' is a number and some are not whole (1.5)"],
    ),
    "json NaN in an unclosed array": (  # NaN alone is read as missing, and named by its row
        "d.json",
        b'[{"text": "NaN is fine in a string", "label": "x"},\n {"text": NaN, "label": "y"}',
        ["line 2: NaN is not valid JSON (write null or a number) (column 11)"],
    ),
    # pandas read a first data row with one field too many as a row label: every column shifted left
    "csv extra field on the first data row": (
        "d.csv",
        b"text,label,annotator\nGreat phone, love it,pos,alice\nfine,neg,bob\nok,pos,carol\n",
        ["line 2: 4 fields where the header has 3 (quote fields that hold the delimiter)"],
    ),
    "csv trailing delimiter on a row": (
        "d.csv",
        b"text,label\na,x\nb,y,\nc,x\n",
        ["line 3: 3 fields where the header has 2 (remove the delimiter at the end of each line)"],
    ),
    "csv a long document and a bad row": (  # the line recount met csv's 131,072-character field limit
        "d.csv",
        b'text,label\n"' + b"x " * 70_000 + b'",a\nb,y\n,x\n',
        ["line 4: 'text' is missing"],
    ),
    "tsv ragged row": ("d.tsv", b"text\tlabel\na\tx\nb\ty\tz\n", ["line 3: 3 fields"]),
    "tsv missing label": ("d.tsv", b"text\tlabel\na\tx\nb\t\n", ["line 3: 'label' is missing"]),
    "csv quoted start": (
        "d.csv",
        b'text,label\na,x\nb,y\n"hi" she said,x\n',
        ["line 4: text follows the quote that closes"],
    ),
    "tsv stray quote": (  # read before as one text 'quoted\tx\nb\ty\nc d' labelled x, rows 4-5 gone
        "d.tsv",
        b'text\tlabel\na\tx\n"quoted\tx\nb\ty\nc "d\tx\ne\ty\n',
        ["line 3: a quote opens a cell that runs to line 5, taking in the rows between"],
    ),
    "parquet garbage": ("d.parquet", b"PAR1 not really", ["is not a readable Parquet file"]),
    "parquet 0 bytes": ("d.parquet", b"", ["is empty (0 bytes)"]),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_bad_file_fails_naming_file_and_line(tmp_path, case):
    name, content, expected = CASES[case]
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(DataError) as err:
        load_task_data(path)
    msg = str(err.value)
    assert str(path) in msg
    for part in expected:
        assert part in msg, msg
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]  # nothing written beside the data


@pytest.mark.parametrize("sep", [";", "\t", "|"])
def test_a_csv_separated_otherwise_is_read_by_its_header(tmp_path, sep):
    # Excel writes ';' where ',' is the decimal mark; a comma inside a text must not decide the separator.
    rows = [("a, b", "x"), ("c; d", "y"), ("e", "x"), ("f, g", "y")]
    body = "\n".join(f'"{t}"{sep}{lab}' if sep in t else f"{t}{sep}{lab}" for t, lab in rows)
    path = tmp_path / "d.csv"
    path.write_text(f"text{sep}label\n{body}\n", encoding="utf-8-sig")
    raw = read_file(path)
    assert raw.columns == ["text", "label"]
    assert list(zip(raw.values("text"), raw.values("label"))) == rows
    assert raw.lines() == [2, 3, 4, 5]


def test_a_quoted_tsv_cell_may_hold_line_ends(tmp_path):
    # what pandas' to_csv(sep="\t") writes for texts with line ends, tabs and quotes: read back as written
    rows = [("two\nlines", "x"), ('say "hi"', "y"), ("a\ttab\nthen more", "x"), ("plain", "y")]
    path = tmp_path / "d.tsv"
    pd.DataFrame(rows, columns=["text", "label"]).to_csv(path, sep="\t", index=False)
    raw = read_file(path)
    assert list(zip(raw.values("text"), raw.values("label"))) == rows
    assert raw.lines() == [2, 4, 5, 7]


def test_a_comma_csv_keeps_other_separators_in_its_texts(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("text,label\na;b|c,x\nd\te,y\nf;g,x\nh,y\n")
    raw = read_file(path)
    assert raw.values("text") == ["a;b|c", "d\te", "f;g", "h"]


def test_parquet_bad_rows_are_named_by_row(tmp_path):
    rows = own_rows(12)
    rows[4] = {"text": "", "label": "pets"}
    rows[7] = {"text": "fine", "label": None}
    path = write_rows(tmp_path / "d.parquet", rows)
    with pytest.raises(DataError) as err:
        load_task_data(path)
    msg = str(err.value)
    assert f"2 bad row(s) of 12 in split 'train' of {path} (rows are 0-based)" in msg
    assert "row 4: 'text' is empty" in msg and "row 7: 'label' is missing" in msg


def test_save_to_disk_errors(tmp_path):
    datasets.DatasetDict(
        a=datasets.Dataset.from_list(own_rows(6)), b=datasets.Dataset.from_list(own_rows(6))
    ).save_to_disk(tmp_path / "dd")
    with pytest.raises(DataError, match=r"holds splits \['a', 'b'\] but none named train"):
        load_task_data(tmp_path / "dd")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "state.json").write_text("{not json")
    with pytest.raises(DataError, match="is not a readable datasets save_to_disk folder"):
        load_task_data(broken)


def test_mixed_label_kinds_fail_on_the_odd_row(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_bytes(GOOD + b'{"text": "e", "label": 3}\n{"text": "f", "label": [1]}\n')
    with pytest.raises(DataError) as err:
        load_task_data(path)
    msg = str(err.value)
    assert "line 3: 'label' is not a non-empty string: 3" in msg
    assert "line 4: 'label' is a list (several labels; one label per row): [1]" in msg


def test_split_file_errors_name_that_file(tmp_path):
    write_rows(tmp_path / "t" / "train.csv", own_rows(12))
    (tmp_path / "t" / "test.jsonl").write_bytes(GOOD + b"oops\n")
    with pytest.raises(DataError, match=r"test\.jsonl line 3: JSON syntax error"):
        load_task_data(tmp_path / "t")


def test_a_syntax_error_in_a_data_root_task_file_is_one_line_naming_it(tmp_path, capsys, caplog):
    # The data.root layout (<root>/<Task>/train.jsonl) is read by another reader than data.path; it ended
    # in datasets' DatasetGenerationError traceback (exit 1).
    from ucse.cli.train import main

    folder = tmp_path / "root" / "Banking77Classification"
    rows = [json.dumps({"text": f"text {i}", "label": i % 2, "label_text": f"c{i % 2}"}) for i in range(10)]
    rows[6] = '{"text": "broken, "label": 1}'
    write_text_lines(folder / "train.jsonl", rows)
    write_text_lines(folder / "test.jsonl", rows[:6])
    root, out = tmp_path / "root", tmp_path / "run"
    code = main([f"data.root={root}", "task=Banking77Classification", f"output_dir={out}"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    (line,) = [ln for ln in err.splitlines() if ln.startswith("error: ")]
    assert f"{folder / 'train.jsonl'} line 7: JSON syntax error" in line, line
    assert not out.exists()
    assert not [r for r in caplog.records if r.levelname == "ERROR"]  # no log line besides the error


def write_text_lines(path, lines):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines))


def test_a_csv_with_cr_only_line_ends_reads_as_with_lf(tmp_path):
    # old Mac exports end lines with CR alone: the separator search read the whole file as one header line
    rows = "".join(f"t{i},{'xy'[i % 2]}\n" for i in range(8))
    (tmp_path / "lf.csv").write_bytes(("text,label\n" + rows).encode())
    (tmp_path / "cr.csv").write_bytes(("text,label\n" + rows).replace("\n", "\r").encode())
    lf, cr = read_file(tmp_path / "lf.csv"), read_file(tmp_path / "cr.csv")
    assert cr.columns == lf.columns == ["text", "label"]
    assert cr.values("text") == lf.values("text") and cr.values("label") == lf.values("label")


def test_an_empty_label_text_cell_is_named_in_its_own_column(tmp_path):
    # the label-id + label_text layout trains on label_text: a missing name was blamed on 'label' (it held 1)
    path = tmp_path / "d.csv"
    path.write_text("text,label,label_text\na,0,x\nb,1,y\nc,1,\nd,0,x\ne,1,y\n")
    with pytest.raises(DataError) as err:
        load_task_data(path)
    msg = str(err.value)
    assert "line 4: 'label_text' is missing" in msg, msg
