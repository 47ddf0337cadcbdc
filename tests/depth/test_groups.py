"""Which depths a truncated ALBERT config can express: checked against transformers itself."""

from __future__ import annotations

import pytest

from albert_edge.depth import check_depth, layer_groups, representable_depths, truncated_num_groups
from albert_edge.errors import UnsupportedError


def test_representable_depths_follow_transformers_group_formula() -> None:
    # L=12, G=2: layers 0-5 run group 0, 6-11 group 1. k <= 6 keeps one group; 8 would
    # need "6 x group 0 then 2 x group 1", which no (8, G') config says. 11 can: (11, 2)
    # runs int(i / 5.5) = six 0s then five 1s, exactly the first 11 layers of (12, 2).
    assert representable_depths(12, 2) == [1, 2, 3, 4, 5, 6, 11, 12]
    assert truncated_num_groups(12, 2, 11) == 2
    assert truncated_num_groups(12, 2, 6) == 1
    assert truncated_num_groups(12, 2, 12) == 2
    assert truncated_num_groups(12, 2, 8) is None
    assert representable_depths(12, 1) == list(range(1, 13))
    # L=4, G=2: (3, 2) runs int(i / 1.5) = 0, 0, 1: the same groups as the first 3 of (4, 2)
    assert representable_depths(4, 2) == [1, 2, 3, 4]
    assert truncated_num_groups(4, 2, 3) == 2
    assert layer_groups(12, 3, 12) == [0] * 4 + [1] * 4 + [2] * 4
    # inner_group_num 2: transformers slices head_mask by int(L'/G') per group and indexes
    # it once per inner layer, so (1, 1) and (3, 2) raise IndexError in its forward
    assert representable_depths(4, 2, inner_group_num=2) == [2, 4]


def test_every_representable_depth_runs_the_same_groups() -> None:
    for layers in range(1, 13):
        for groups in range(1, layers + 1):
            for k in representable_depths(layers, groups):
                g = truncated_num_groups(layers, groups, k)
                assert g is not None
                assert layer_groups(k, g, k) == layer_groups(layers, groups, k)


def test_unrepresentable_depth_is_refused_with_the_choices() -> None:
    with pytest.raises(
        UnsupportedError, match=r"depth 8 .* choose one of: 1, 2, 3, 4, 5, 6, 11, 12"
    ):
        check_depth(12, 2, 8)
    assert check_depth(12, 2, 4) == 1
