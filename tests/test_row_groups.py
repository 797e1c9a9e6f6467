"""rows_by_group: a batch's rows, each group asked once, in the batch's order."""

import numpy as np
import pytest

from dataloader._datasets.row_groups import rows_by_group

GROUPS = [list(range(0, 4)), list(range(4, 5)), list(range(5, 12)), list(range(12, 13))]
ENDS = np.cumsum([len(group) for group in GROUPS])


def test_rows_come_in_the_batchs_order_each_group_asked_once():
    asked = []

    def group_rows(group, positions):
        asked.append(group)
        return [GROUPS[group][i] for i in positions]

    indices = [12, 0, 6, 5, 0, -2, 3]
    assert rows_by_group(indices, ENDS, group_rows) == [12, 0, 6, 5, 0, 11, 3]
    assert asked == [0, 2, 3]  # each group touched, once


def test_no_indices_ask_no_group():
    assert rows_by_group([], ENDS, lambda group, positions: pytest.fail("asked")) == []


@pytest.mark.parametrize("bad", [13, -14])
def test_out_of_range_indices_raise_index_error_naming_them(bad):
    with pytest.raises(IndexError, match=f"index {bad} out of range for 13 rows"):
        rows_by_group([0, bad], ENDS, lambda group, positions: [])


def test_indices_that_are_not_integers_raise_type_error():
    with pytest.raises(TypeError, match="indices should be integers"):
        rows_by_group(["a"], ENDS, lambda group, positions: [])


def mixed_table():
    pa = pytest.importorskip("pyarrow")  # the arrow extra (not beside a free-threaded build)
    return pa.table({
        "int8": pa.array([-1, 2, 3], pa.int8()),
        "uint64": pa.array([2**64 - 1, 0, 5], pa.uint64()),
        "float32": pa.array([0.1, 2.5, -3.0], pa.float32()),
        "float16": pa.array(np.array([0.1, 2.5, -3.0], np.float16), pa.float16()),
        "bool": [True, False, True],
        "tokens": pa.array([[1, 2], [], [3]], pa.list_(pa.int32())),
        "floats": pa.array([[0.1], [0.2, 0.3], []], pa.large_list(pa.float32())),
        "with_null": [1, None, 3],
        "list_with_null": [[1, None], [2], None],
        "text": ["a", "", "ü"],
        "nested": [{"x": 1}, {"x": 2}, {"x": 3}],
    })


def test_numbers_and_number_lists_are_numpy_views_otherwise_python_values():
    from dataloader._datasets.row_groups import GroupColumns

    table = mixed_table()
    row = GroupColumns(table).rows([0])[0]
    assert isinstance(row["int8"], np.int8) and row["float32"] == np.float32(0.1)
    assert row["tokens"].dtype == np.int32 and not row["tokens"].flags.owndata
    assert row["floats"].dtype == np.float32 and row["floats"].tolist() == [np.float32(0.1)]
    assert (row["with_null"], row["list_with_null"], row["nested"]) == (1, [1, None], {"x": 1})
