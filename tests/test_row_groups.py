"""rows_by_group: a batch's rows, each group asked once, in the batch's order."""

import numpy as np
import pytest

from dataloader._datasets.row_groups import rows_by_group

GROUPS = [list(range(0, 4)), list(range(4, 5)), list(range(5, 12)), list(range(12, 13))]
ENDS = np.cumsum([len(group) for group in GROUPS])


@pytest.mark.parametrize("start", [0, 1, 2, 7])
def test_rows_come_in_the_batchs_order_whatever_group_is_read_first(start):
    asked = []

    def group_rows(group, positions):
        asked.append(group)
        return [GROUPS[group][i] for i in positions]

    indices = [12, 0, 6, 5, 0, -2, 3]
    assert rows_by_group(indices, ENDS, group_rows, start=start) == [12, 0, 6, 5, 0, 11, 3]
    assert sorted(asked) == [0, 2, 3]  # each group touched, once
    assert asked[0] == [0, 2, 3][start % 3]


def test_no_indices_ask_no_group():
    assert rows_by_group([], ENDS, lambda group, positions: pytest.fail("asked")) == []


@pytest.mark.parametrize("bad", [13, -14])
def test_out_of_range_indices_raise_index_error_naming_them(bad):
    with pytest.raises(IndexError, match=f"index {bad} out of range for 13 rows"):
        rows_by_group([0, bad], ENDS, lambda group, positions: [])


def test_indices_that_are_not_integers_raise_type_error():
    with pytest.raises(TypeError, match="indices should be integers"):
        rows_by_group(["a"], ENDS, lambda group, positions: [])
