"""``ucse.json_read.loads``: Python's ``json`` with nesting it cannot follow reported as malformed JSON.

Reference: ``json.loads`` itself for every text it can read, and the bracket depth counted by hand.
"""

from __future__ import annotations

import json

import pytest

from ucse import json_read


@pytest.mark.parametrize("text", ['{"a": [1, {"b": "[[{"}], "c": null}', "[]", '"x"', b'{"k": 2.5}'])
def test_what_json_reads_comes_back_the_same(text):
    assert json_read.loads(text) == json.loads(text)


def test_nesting_too_deep_is_a_decode_error_at_depth_1000_outside_strings():
    with pytest.raises(RecursionError):  # what the readers met before
        json.loads("[" * 100_000)
    # a string holding brackets counts for nothing; the object is depth 1, each '[' one more
    text = '{"s": "[[[[", "t": ' + "[" * 100_000 + "]" * 100_000 + "}"
    with pytest.raises(json.JSONDecodeError) as err:
        json_read.loads(text.encode())
    first = text.index("[", text.index('"t"'))
    assert err.value.pos == first + 998 and text[err.value.pos] == "["
    assert isinstance(err.value, ValueError) and "nested deeper" in str(err.value)


def test_keyword_arguments_reach_json():
    with pytest.raises(ValueError, match="no NaN"):
        json_read.loads("[NaN]", parse_constant=lambda name: (_ for _ in ()).throw(ValueError("no NaN")))
