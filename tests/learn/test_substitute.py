"""``albert_edge.learn.substitute``: new sentences from a phrase file's own sentences, one
phrase swapped for another seen between the same two words."""

from __future__ import annotations

from albert_edge.learn.substitute import Substitute, substitutions

# Two SST-style sentences, each beside its phrases. "film" and "plot" sit between the same
# two words ("the" ... "is"), and so do the two endings ("and" ... the end); "is good" and
# "is dull" do not ("film" ... "and" against "plot" ... "and"), so they never trade places.
ROWS = [
    "the film is good and the cast is great .",
    "film",
    "is good",
    "the cast is great .",
    "the plot is dull and the cast is weak .",
    "plot",
    "is dull",
    "the cast is weak .",
    "a lovely , moving picture",  # a sentence of its own whose phrases fit nowhere else
    "lovely",
]


def _allowed(rows: list[str]) -> set[str]:
    """Every sentence one swap can make, by brute force: for each sentence (a row inside no
    other), each of its phrases at each place it occurs, each phrase of another sentence
    found between the same two words there."""
    words = [r.split() for r in rows]

    def inside(p: list[str], s: list[str]) -> list[int]:
        return [i for i in range(len(s) - len(p) + 1) if s[i : i + len(p)] == p]

    sentences = [s for s in words if not any(s != o and inside(s, o) for o in words)]
    places = []  # (sentence, start, end, context)
    for s in sentences:
        for p in words:
            if 0 < len(p) < len(s):
                for i in inside(p, s):
                    j = i + len(p)
                    places.append((s, i, j, (s[i - 1] if i else "^", s[j] if j < len(s) else "$")))
    out = set()
    for s, i, j, ctx in places:
        for t, a, b, other in places:
            if other == ctx and t is not s:
                out.add(" ".join(s[:i] + t[a:b] + s[j:]))
    return out - {" ".join(w) for w in words}


def test_each_new_sentence_swaps_one_phrase_for_one_seen_in_the_same_context() -> None:
    got = substitutions(ROWS, Substitute(per_sentence=5, seed=3))
    assert got, "the two sentences share contexts: something to swap"
    assert len(set(got)) == len(got)
    assert set(got) <= _allowed(ROWS)
    many = substitutions(ROWS, Substitute(per_sentence=50, seed=3))
    assert set(many) == {
        "the plot is good and the cast is great .",  # film -> plot
        "the film is good and the cast is weak .",  # the ending
        "the film is dull and the cast is weak .",  # plot -> film
        "the plot is dull and the cast is great .",
    }


def test_seeded_none_asked_and_nothing_to_swap() -> None:
    sub = Substitute(per_sentence=4, seed=7)
    assert substitutions(ROWS, sub) == substitutions(ROWS, sub)
    assert substitutions(ROWS, Substitute(per_sentence=0)) == []
    # rows that contain no other row: every row its own sentence, no phrase to swap
    assert substitutions(["a good film", "a bad plot", "dull"], sub) == []
    # the lone sentence's phrase ("lovely") has no stand-in: only the two others give rows
    assert all("lovely" not in line for line in substitutions(ROWS, sub))


def test_at_most_per_sentence_from_each_sentence() -> None:
    one = substitutions(ROWS, Substitute(per_sentence=1, seed=1))
    assert len(one) == 2  # one from each sentence whose phrases have a stand-in
    assert len(substitutions(ROWS, Substitute(per_sentence=50, seed=1))) > 2
