"""cqb.analysis.aggregate on fabricated run files: the statistics, row order and bytes of a table."""

from __future__ import annotations

import math
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import curve_of, fabricate_run
from cqb.analysis.aggregate import (COLUMNS, aggregate_curves, curve_table, final_values, mean_sd_se, read_table,
                           table_text, write_table)


def curves_of(random_runs, reverse_files=False):
    return [curve_of(policy, list(reversed(files)) if reverse_files else files, "", "")
            for policy, (files, _, _) in random_runs.items()]


def test_statistics_match_numpy(random_runs):
    table = aggregate_curves(curves_of(random_runs))
    assert list(table.columns) == list(COLUMNS)
    for policy, (_, queues, oracles) in random_runs.items():
        rows = table[table["policy"] == policy]
        n = queues.shape[0]
        assert (rows["n_seeds"] == n).all()
        assert rows["t"].tolist() == list(range(1, queues.shape[1] + 1))
        for name, values in (("queue", queues), ("oracle", oracles), ("regret", queues - oracles)):
            np.testing.assert_allclose(rows[f"{name}_mean"], values.mean(axis=0), rtol=0, atol=1e-12)
            np.testing.assert_allclose(rows[f"{name}_sd"], values.std(axis=0, ddof=1), rtol=0, atol=1e-12)
            np.testing.assert_allclose(rows[f"{name}_se"], values.std(axis=0, ddof=1) / math.sqrt(n),
                                       rtol=0, atol=1e-12)
        for name, values in (("queue", queues), ("regret", queues - oracles)):
            np.testing.assert_allclose(rows[f"{name}_median"], np.median(values, axis=0), rtol=0, atol=1e-12)
            np.testing.assert_allclose(rows[f"{name}_q25"], np.percentile(values, 25, axis=0), atol=1e-12)
            np.testing.assert_allclose(rows[f"{name}_q75"], np.percentile(values, 75, axis=0), atol=1e-12)


def test_population_sd_when_asked(random_runs):
    files, queues, _ = random_runs["cqb_opt"]
    table = aggregate_curves([curve_of("cqb_opt", files)], ddof=0)
    np.testing.assert_allclose(table["queue_sd"], queues.std(axis=0), atol=1e-12)


def test_rows_follow_curve_order(random_runs):
    curves = curves_of(random_runs)
    forward = aggregate_curves(curves)
    backward = aggregate_curves(curves[::-1])
    assert forward["policy"].drop_duplicates().tolist() == ["cqb_opt", "random"]
    assert backward["policy"].drop_duplicates().tolist() == ["random", "cqb_opt"]


def test_bytes_do_not_depend_on_file_order(random_runs, tmp_path):
    write_table(aggregate_curves(curves_of(random_runs)), tmp_path / "a.tsv")
    write_table(aggregate_curves(curves_of(random_runs, reverse_files=True)), tmp_path / "b.tsv")
    write_table(aggregate_curves(curves_of(random_runs)), tmp_path / "c.tsv")
    a = (tmp_path / "a.tsv").read_bytes()
    assert a == (tmp_path / "b.tsv").read_bytes() == (tmp_path / "c.tsv").read_bytes()
    # fixed float format: every statistic has six decimals
    first = a.decode().splitlines()[1].split("\t")
    assert all(len(value.split(".")[1]) == 6 for value in first[4:13])
    assert not list(tmp_path.glob(".*")), "no temporary files left behind"


def test_table_round_trip(random_runs, tmp_path):
    curves = [curve_of("cqb_eps", random_runs["cqb_opt"][0], "slack", "0.05"),
              curve_of("cqb_eps", random_runs["random"][0], "slack", "0.1")]
    table = aggregate_curves(curves)
    write_table(table, tmp_path / "t.tsv")
    back = read_table(tmp_path / "t.tsv")
    assert back["sweep_value"].drop_duplicates().tolist() == ["0.05", "0.1"]  # text, as written
    assert back["sweep_param"].eq("slack").all()
    np.testing.assert_allclose(back["queue_mean"], table["queue_mean"], atol=5e-7)
    # without a sweep, the sweep columns are empty strings
    plain = aggregate_curves(curves_of(random_runs))
    write_table(plain, tmp_path / "p.tsv")
    assert read_table(tmp_path / "p.tsv")["sweep_value"].eq("").all()


def test_single_seed_has_no_sd(tmp_path):
    path = fabricate_run(tmp_path / "seed0.npz", [0, 1, 2], [0, 0, 1])
    table = aggregate_curves([curve_of("random", [path])])
    assert table["queue_sd"].isna().all() and table["queue_se"].isna().all()
    np.testing.assert_array_equal(table["regret_mean"], [0, 1, 1])
    write_table(table, tmp_path / "t.tsv")
    assert "\tnan\t" in (tmp_path / "t.tsv").read_text()
    assert read_table(tmp_path / "t.tsv")["queue_sd"].isna().all()


def test_final_values(random_runs):
    table = aggregate_curves(curves_of(random_runs))
    final = final_values(table)
    assert final["policy"].tolist() == ["cqb_opt", "random"]
    _, queues, _ = random_runs["random"]
    assert final.loc[1, "queue_mean"] == pytest.approx(queues[:, -1].mean())


def test_mismatched_horizons_are_refused(tmp_path):
    a = fabricate_run(tmp_path / "a.npz", [0, 1, 2], [0, 0, 0], seed=0)
    b = fabricate_run(tmp_path / "b.npz", [0, 1], [0, 0], seed=1)
    with pytest.raises(ValueError, match="different horizons"):
        aggregate_curves([curve_of("random", [a, b])])


def test_duplicate_seed_or_curve_is_refused(tmp_path):
    a = fabricate_run(tmp_path / "a.npz", [0, 1], [0, 0], seed=3)
    b = fabricate_run(tmp_path / "b.npz", [1, 1], [0, 0], seed=3)
    with pytest.raises(ValueError, match="same seed"):
        aggregate_curves([curve_of("random", [a, b])])
    with pytest.raises(ValueError, match="given twice"):
        aggregate_curves([curve_of("random", [a]), curve_of("random", [b])])


def test_mean_sd_se_of_constant_columns():
    mean, sd, se = mean_sd_se(np.full((5, 3), 7))
    np.testing.assert_array_equal(mean, 7)
    np.testing.assert_array_equal(sd, 0)
    np.testing.assert_array_equal(se, 0)
    with pytest.raises(ValueError):
        mean_sd_se(np.empty((0, 3)))


def test_mean_sd_se_defaults_to_the_sample_sd_and_handles_two_seeds():
    values = np.array([[1.0, 4.0], [3.0, 4.0]])
    mean, sd, se = mean_sd_se(values)  # default ddof = 1
    np.testing.assert_array_equal(mean, [2.0, 4.0])
    np.testing.assert_allclose(sd, [math.sqrt(2), 0.0], rtol=1e-15)
    np.testing.assert_allclose(se, [1.0, 0.0], rtol=1e-15)


@pytest.mark.parametrize("n_seeds,ddof", [(1, 1), (1, 2), (2, 2), (3, 5)])
def test_sd_is_nan_of_the_right_shape_without_warnings_when_seeds_do_not_exceed_ddof(n_seeds, ddof):
    values = np.arange(n_seeds * 3, dtype=float).reshape(n_seeds, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no 0/0 computed on the way
        mean, sd, se = mean_sd_se(values, ddof)
    assert sd.shape == se.shape == (3,)
    assert np.isnan(sd).all() and np.isnan(se).all()
    np.testing.assert_array_equal(mean, values.mean(axis=0))


def test_mean_sd_se_computes_in_float64_whatever_the_input_dtype():
    values = np.array([[0.1, 1e8], [0.2, 1e8 + 1]], dtype=np.float32)
    for got, expected in zip(mean_sd_se(values), mean_sd_se(values.astype(np.float64))):
        assert got.dtype == np.float64
        np.testing.assert_array_equal(got, expected)


def test_empty_input_is_refused_by_name():
    with pytest.raises(ValueError, match="^no runs to aggregate$"):
        mean_sd_se(np.empty((0, 3)))
    with pytest.raises(ValueError, match="^no curves to aggregate$"):
        aggregate_curves([])


def test_curve_table_defaults_to_the_sample_sd(random_runs):
    files, queues, _ = random_runs["random"]
    table = curve_table(curve_of("random", files))
    np.testing.assert_allclose(table["queue_sd"], queues.std(axis=0, ddof=1), atol=1e-12)


def test_aggregate_table_has_a_fresh_row_index(random_runs):
    table = aggregate_curves(curves_of(random_runs))
    assert table.index.equals(pd.RangeIndex(len(table)))


def test_queue_and_oracle_of_different_lengths_are_refused(tmp_path):
    a = fabricate_run(tmp_path / "a.npz", [0, 1, 2], [0, 0, 0], seed=0)
    b = fabricate_run(tmp_path / "b.npz", [0, 1, 2], [0, 0], seed=1)
    with pytest.raises(ValueError, match="different horizons"):
        aggregate_curves([curve_of("random", [a, b])])


def test_numeric_looking_labels_round_trip_as_text(random_runs, tmp_path):
    files = random_runs["random"][0]
    write_table(aggregate_curves([curve_of("007", files, "010", "1e3")]), tmp_path / "t.tsv")
    back = read_table(tmp_path / "t.tsv")
    assert back.loc[0, ["policy", "sweep_param", "sweep_value"]].tolist() == ["007", "010", "1e3"]


def test_final_values_columns_and_fresh_index(random_runs):
    final = final_values(aggregate_curves(curves_of(random_runs)))
    assert list(final.columns) == ["policy", "sweep_param", "sweep_value", "t", "queue_mean", "queue_sd",
                                   "oracle_mean", "regret_mean", "regret_sd", "n_seeds"]
    assert final.index.tolist() == [0, 1] and final["t"].tolist() == [50, 50]


# ---------------------------------------------------------------- unreadable run files


def _truncated(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # a crashed copy, a full quota


def _other_format(path):
    path.write_text("queue,oracle_queue\n1,0\n")  # numpy calls this "pickled data"


def _empty(path):
    path.write_bytes(b"")


def _an_npy_array(path):
    with open(path, "wb") as handle:
        np.save(handle, np.arange(3))


def _lacking_arrays(path):
    with open(path, "wb") as handle:
        np.savez_compressed(handle, queue=np.arange(3))


@pytest.mark.parametrize("damage, problem", [
    (_truncated, "not a complete .npz archive"),
    (_other_format, "not a complete .npz archive"),
    (_empty, "it is empty"),
    (_an_npy_array, "not a complete .npz archive"),
    (_lacking_arrays, "lacks"),
])
def test_an_unreadable_run_file_is_one_error_naming_it_and_saying_to_delete_it(random_runs, damage, problem):
    files = random_runs["cqb_opt"][0]
    damage(files[2])
    with pytest.raises(ValueError) as raised:
        aggregate_curves(curves_of(random_runs))
    message = str(raised.value)
    assert message.startswith(f"{files[2]} is not a readable run file (") and "\n" not in message
    assert problem in message and message.endswith("delete it so that Snakemake runs it again")
    assert "pickle" not in message


def test_the_aggregate_script_ends_on_one_line_for_an_unreadable_run_file(random_runs, tmp_path):
    """What Snakemake shows of the rule: the script's one line (and its log), no traceback."""
    import runpy
    from types import SimpleNamespace

    from conftest import REPO

    files = random_runs["random"][0]
    _truncated(files[0])
    log = tmp_path / "aggregate.log"
    smk = SimpleNamespace(
        log=[str(log)], output=SimpleNamespace(table=str(tmp_path / "t.tsv"), runs=str(tmp_path / "r.tsv"),
                                               curves=str(tmp_path / "c.tsv")),
        params=SimpleNamespace(curves=curves_of(random_runs), ddof=1, float_format="%.6f", summaries={}))
    with pytest.raises(SystemExit) as exited:
        runpy.run_path(str(REPO / "scripts" / "aggregate.py"), init_globals={"snakemake": smk})
    line = f"aggregate: {files[0]} is not a readable run file"
    assert str(exited.value.code).startswith(line) and "\n" not in str(exited.value.code)
    assert log.read_text().startswith(line)
    assert not (tmp_path / "t.tsv").exists()


def pandas_bytes(table: pd.DataFrame, float_format: str) -> str:
    """What write_table wrote before its own text: pandas' CSV writer."""
    return table.to_csv(sep="\t", index=False, float_format=float_format, na_rep="nan", lineterminator="\n")


def mixed_table(rows: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    values = rng.normal(scale=10.0 ** rng.integers(-8, 9, rows), size=rows)
    values[rng.random(rows) < 0.1] = np.nan
    values[rng.random(rows) < 0.02] = np.inf * rng.choice([-1, 1])
    values[rng.random(rows) < 0.02] = -0.0
    return pd.DataFrame({
        "policy": rng.choice(["cqb_opt", "random", "cqb_ε"], rows), "sweep_value": rng.choice(["", "0.1", "5"], rows),
        "t": np.arange(1, rows + 1), "value": values, "whole": np.round(values), "stalled": rng.random(rows) < 0.5,
        "count": rng.integers(-(2 ** 62), 2 ** 62, rows, dtype=np.int64),
        "seed": rng.integers(0, 2 ** 63, rows, dtype=np.uint64)})


@pytest.mark.parametrize("float_format", ["%.6f", "%.3g", "%.10e"])
def test_the_table_text_is_pandas_csv_bit_for_bit(random_runs, float_format):
    """write_table's own text against pandas' writer, on an aggregate table, on
    tables of every column kind it writes itself (NaN, ±inf, −0, large and
    tiny floats, 64-bit integers, booleans, text), empty ones, and where it
    leaves the writing to pandas (fields pandas quotes, None, other dtypes)."""
    tables = [aggregate_curves(curves_of(random_runs)), *(mixed_table(rows, seed) for seed, rows in enumerate((1, 7, 500))),
              mixed_table(0, 9)]
    for table in tables:
        text = table_text(table, float_format)
        assert text is not None and text == pandas_bytes(table, float_format)
    quoted = [mixed_table(5, 1).assign(policy=value) for value in ("a\tb", "a\nb", 'say "x"', "a\rb", None)]
    others = [mixed_table(5, 2).astype({"t": np.int32}), mixed_table(5, 3).astype({"value": np.float32}),
              mixed_table(5, 4)[["value"]], mixed_table(5, 5).rename(columns={"t": "value"}),
              mixed_table(5, 6).astype({"t": "Int64"})]
    for table in quoted + others:
        assert table_text(table, float_format) is None, table.dtypes
    for table in tables + quoted + others:  # either way, the file is pandas' bytes
        with tempfile.TemporaryDirectory() as folder:
            write_table(table, Path(folder) / "t.tsv", float_format)
            assert (Path(folder) / "t.tsv").read_bytes() == pandas_bytes(table, float_format).encode()
