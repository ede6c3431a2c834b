"""The texts a classifier is handed in memory (ucse/inference/texts.py)."""

import numpy as np
import pandas as pd
import pytest

from ucse.inference.texts import as_texts


def test_a_one_column_table_gives_its_rows():
    texts = ["my bank card", "a dog", "jazz"]
    # a DataFrame iterates its column names: predict(df) answered once, for the text "text"
    assert as_texts(pd.DataFrame({"text": texts})) == texts
    assert as_texts(np.array(texts, dtype=object)[:, None]) == texts
    assert as_texts(pd.Series(texts)) == texts and as_texts(tuple(texts)) == texts
    assert as_texts("one text") == ["one text"]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            pd.DataFrame({"id": [1, 2], "text": ["a", "b"]}),
            r"one column of strings, got a table of shape \(2, 2\)",
        ),
        (b"my bank card", "texts are bytes; decode them"),
    ],
)
def test_a_table_of_several_columns_or_bytes_is_refused(value, message):
    with pytest.raises(ValueError, match=message):
        as_texts(value)
