"""Dataset.filter(expr="..."): each form of the string predicate against the same test in plain
Python, over several block boundaries; malformed expressions and unknown columns are ValueErrors
naming them, at filter() time where the columns are known and in the data task otherwise."""

import math
import pickle

import pyarrow as pa
import pyarrow.csv as pcsv
import pytest


@pytest.fixture(scope="module")
def rd(cluster):
    import airt.data
    airt.data.DataContext.get_current().enable_progress_bars = False
    return airt.data


ROWS = [{"x": x, "y": (x * 7) % 5 - 2, "label": ["cat", "dog", "bird"][x % 3],
         "f": (math.nan if x % 11 == 0 else x / 4), "maybe": (None if x % 4 == 0 else x)}
        for x in range(-20, 40)]

# (expression, the same test in plain Python)
CASES = [
    ("x > 3 and label == 'cat'", lambda r: r["x"] > 3 and r["label"] == "cat"),
    ("x >= 3 or y < -1", lambda r: r["x"] >= 3 or r["y"] < -1),
    ("not (x != 5)", lambda r: r["x"] == 5),
    ("x <= -4", lambda r: r["x"] <= -4),
    ("1 < x <= 9", lambda r: 1 < r["x"] <= 9),
    ("(x + y) * 2 > 10", lambda r: (r["x"] + r["y"]) * 2 > 10),
    ("x - y == 3", lambda r: r["x"] - r["y"] == 3),
    ("x / 4 > 2.2", lambda r: r["x"] / 4 > 2.2),
    ("x // 3 == -2", lambda r: r["x"] // 3 == -2),
    ("x % 4 == 1", lambda r: r["x"] % 4 == 1),
    ("-x > 15", lambda r: -r["x"] > 15),
    ("f * 2 > 3.0", lambda r: r["f"] * 2 > 3.0),
    ("label + 's' == 'dogs'", lambda r: r["label"] + "s" == "dogs"),
    ("label in ['cat', 'bird']", lambda r: r["label"] in ["cat", "bird"]),
    ("x not in (1, 2, 3, -5)", lambda r: r["x"] not in (1, 2, 3, -5)),
    ("is_in(y, [0, 2])", lambda r: r["y"] in [0, 2]),
    ("is_null(maybe)", lambda r: r["maybe"] is None),
    ("maybe is None", lambda r: r["maybe"] is None),
    ("is_valid(maybe) and maybe > 10", lambda r: r["maybe"] is not None and r["maybe"] > 10),
    ("is_not_null(maybe)", lambda r: r["maybe"] is not None),
    ("maybe is not None", lambda r: r["maybe"] is not None),
    ("is_nan(f)", lambda r: math.isnan(r["f"])),
    ("is_null(f, nan_is_null=True)", lambda r: math.isnan(r["f"])),
    # a null predicate drops its row: maybe > 5 is null where maybe is
    ("maybe > 5", lambda r: r["maybe"] is not None and r["maybe"] > 5),
    ("True", lambda r: True),
]


def same(rows, want):
    key = lambda r: r["x"]  # noqa: E731
    norm = [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
            for r in sorted(rows, key=key)]
    expected = [{k: (None if isinstance(v, float) and math.isnan(v) else v)
                 for k, v in r.items()} for r in sorted(want, key=key)]
    return norm == expected


@pytest.mark.parametrize("blocks", [1, 7])
@pytest.mark.parametrize("expr,test", CASES, ids=[c[0] for c in CASES])
def test_each_form_keeps_the_rows_plain_python_keeps(rd, expr, test, blocks):
    got = rd.from_items(ROWS, override_num_blocks=blocks).filter(expr=expr).take_all()
    want = [r for r in ROWS if test(r)]
    assert want, "a case that keeps nothing tests little"
    assert same(got, want), expr


def test_an_expression_filter_fuses_with_the_maps_around_it_and_keeps_order(rd):
    ds = (rd.range(300, override_num_blocks=6)
          .map_batches(lambda b: {"id": b["id"], "sq": b["id"] ** 2})
          .filter(expr="sq % 7 == 1 and id > 10")
          .map(lambda r: {"id": r["id"]}))
    assert [r["id"] for r in ds.take_all()] == [i for i in range(300)
                                                if i * i % 7 == 1 and i > 10]
    assert "Filter(sq % 7 == 1 and id > 10)" in ds.stats()


def test_a_filter_that_keeps_nothing_gives_an_empty_dataset(rd):
    ds = rd.range(50, override_num_blocks=5).filter(expr="id > 1000")
    assert ds.count() == 0 and ds.take_all() == []


@pytest.mark.parametrize("expr,named", [
    ("x >", "invalid syntax"),
    ("x > 3 and", "invalid syntax"),
    ("open('f') == 1", "the function open()"),
    ("__import__('os').system('true')", "is not supported"),
    ("x[0] > 1", "Subscript"),
    ("[r for r in x]", "ListComp"),
    ("lambda: True", "Lambda"),
    ("x == None", "is_null(x)"),
    ("x in y", "literal list"),
    ("x ** 2 > 1", "Pow"),
    ("x is 3", "`is` with anything but None"),
    ("is_null()", "is_null() takes one column"),
    ("is_in(x)", "is_in() takes a column and a list"),
])
def test_a_malformed_expression_is_a_value_error_at_filter_time(rd, expr, named):
    ds = rd.from_items(ROWS)
    with pytest.raises(ValueError) as error:
        ds.filter(expr=expr)
    assert named in str(error.value) and repr(expr) in str(error.value)


def test_an_unknown_column_is_named_at_filter_time_where_the_columns_are_known(rd, tmp_path):
    import pyarrow.parquet as pq
    sources = {
        "from_items": rd.from_items(ROWS),
        "range": rd.range(10),
        "select_columns": rd.from_items(ROWS).select_columns(["x", "label"]),
        "rename": rd.from_items(ROWS).rename_columns({"y": "why"}).random_shuffle(seed=1),
    }
    pq.write_table(pa.Table.from_pylist(ROWS[:5]), tmp_path / "a.parquet")
    sources["read_parquet"] = rd.read_parquet(str(tmp_path / "a.parquet"))
    for name, ds in sources.items():
        with pytest.raises(ValueError, match="no column 'nope'"):
            ds.filter(expr="x > 1 or nope == 2")
    with pytest.raises(ValueError, match="no column 'y'"):
        sources["rename"].filter(expr="y > 0")
    assert sorted(r["why"] for r in sources["rename"].filter(expr="why > 1").take_all()) == \
        sorted(r["y"] for r in ROWS if r["y"] > 1)


def test_an_unknown_column_is_named_by_the_task_when_only_running_tells(rd, tmp_path):
    path = tmp_path / "rows.csv"
    pcsv.write_csv(pa.Table.from_pylist([{"a": i} for i in range(10)]), path)
    ds = rd.read_csv(str(path)).filter(expr="b > 1")  # csv: columns known only once read
    with pytest.raises(ValueError, match="no column 'b'"):
        ds.take_all()
    mapped = rd.range(10).map_batches(lambda b: {"z": b["id"]}).filter(expr="id > 1")
    with pytest.raises(ValueError, match="no column 'id'"):
        mapped.take_all()


def test_type_errors_in_the_blocks_are_value_errors_naming_the_expression(rd):
    ds = rd.from_items(ROWS)
    for expr, named in [("label > 3", "label > 3"), ("x + 1", "not booleans"),
                        ("x and y > 1", "`and` takes booleans"), ("x // 0 == 1", "divide")]:
        with pytest.raises(ValueError, match=named):
            ds.filter(expr=expr).take_all()


def test_filter_takes_exactly_one_of_fn_and_expr(rd):
    ds = rd.from_items(ROWS)
    with pytest.raises(ValueError, match="Exactly one of 'fn' or 'expr'"):
        ds.filter()
    with pytest.raises(ValueError, match="Exactly one of 'fn' or 'expr'"):
        ds.filter(lambda r: True, expr="x > 1")
    with pytest.raises(ValueError, match="fn_args"):
        ds.filter(expr="x > 1", fn_args=(1,))
    with pytest.raises(TypeError, match="takes a string"):
        ds.filter(expr=3)


def test_a_parsed_predicate_pickles_as_its_text(rd):
    from airt.data._expressions import Predicate
    p = pickle.loads(pickle.dumps(Predicate("x > 1 and label == 'cat'")))
    assert p.text == "x > 1 and label == 'cat'" and p.columns == ["label", "x"]
