"""albert_edge.tasks.phrases: which rows are phrases of which sentence (what train's
held-out draw groups; the draw itself: tests/learn/test_split.py)."""

from __future__ import annotations

from albert_edge.tasks.phrases import phrase_groups


def test_copies_case_and_spacing_go_together_and_words_keep_their_bounds() -> None:
    rows = ["A  good film", "a good film", "good", "goods", "a good film ."]
    g = phrase_groups(rows)
    assert g[0] == g[1] == g[2] == g[4]  # inside the one sentence "a good film ."
    assert g[3] != g[4] and g[3] >= 0  # "good" is not inside "goods"


def test_a_phrase_inside_two_sentences_is_always_trained_on() -> None:
    rows = ["it is a good film .", "a good film", "it is a good film , not a great one .", "great"]
    g = phrase_groups(rows)
    assert g[1] == -1  # inside both sentences: common language
    assert g[0] != g[2] and g[3] == g[2]  # "great" only inside the second
    assert g == [0, -1, 1, 1]  # groups numbered by first row


def test_every_row_its_own_sentence_where_none_contains_another() -> None:
    rows = ["one two", "two three", "", "three one"]
    assert phrase_groups(rows) == [0, 1, 2, 3]
    assert phrase_groups([]) == []
