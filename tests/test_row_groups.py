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


@pytest.mark.parametrize("list_type", ["list", "large_list"])
def test_gathered_columns_are_the_rows_of_every_group(list_type):
    pa = pytest.importorskip("pyarrow")
    from dataloader._datasets.column_batch import ListValues
    from dataloader._datasets.row_groups import GroupColumns, gather_columns, locate_rows

    rng = np.random.default_rng(0)
    make = pa.list_ if list_type == "list" else pa.large_list
    tables = []
    for group in GROUPS:
        ids = [rng.integers(-9, 9, rng.integers(0, 6)).tolist() for _ in group]
        table = pa.table({"ids": pa.array(ids, make(pa.int16())),
                          "n": pa.array(group, pa.uint8()), "text": [str(i) for i in group]})
        tables.append(table.slice(1) if len(group) > 1 else table)  # offsets not from 0
    ends = np.cumsum([table.num_rows for table in tables])
    groups = [GroupColumns(table) for table in tables]
    wanted = rng.integers(0, int(ends[-1]), 40)
    touched, group_of, rows = locate_rows(wanted, ends)
    batch = gather_columns([groups[k] for k in touched], group_of, rows)
    expected = rows_by_group(wanted, ends, lambda k, local: groups[k].rows(local))
    assert isinstance(batch.columns[0], ListValues) and batch.columns[0].values.dtype == np.int16
    assert batch.columns[1].dtype == np.uint8 and batch.columns[2] == [r["text"] for r in expected]
    assert [{k: np.asarray(v).tolist() for k, v in row.items()} for row in batch.rows()] == \
        [{k: np.asarray(v).tolist() for k, v in row.items()} for row in expected]


@pytest.mark.parametrize("groups, rows_wanted", [
    (6, 40),  # a batch over few groups: numbered by marking them
    (5_000, 30),  # few rows over many groups, far apart: numbered by sorting them
    (300, 1),
])
def test_located_rows_are_numpys_searchsorted_and_unique(groups, rows_wanted):
    from dataloader._datasets.row_groups import locate_rows

    rng = np.random.default_rng(groups)
    ends = np.cumsum(rng.integers(0, 4, groups))  # empty groups among them
    ends[-1] += 1
    for _ in range(20):
        wanted = rng.integers(0, int(ends[-1]), rows_wanted)
        numbers = np.searchsorted(ends, wanted, side="right")
        expected_touched, expected_group_of = np.unique(numbers, return_inverse=True)
        touched, group_of, rows = locate_rows(wanted, ends)
        assert touched == expected_touched.tolist()
        assert group_of.tolist() == expected_group_of.tolist()
        starts = np.concatenate([[0], ends])[numbers]
        assert rows.tolist() == (wanted - starts).tolist()


def test_no_rows_touch_no_group():
    from dataloader._datasets.row_groups import locate_rows

    touched, group_of, rows = locate_rows(np.array([], np.int64), ENDS)
    assert (touched, len(group_of), len(rows)) == ([], 0, 0)
