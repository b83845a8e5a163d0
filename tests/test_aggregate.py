"""cqb.aggregate on fabricated run files: the statistics, row order and bytes of a table."""

from __future__ import annotations

import math

import numpy as np
import pytest

from conftest import fabricate_run
from cqb.aggregate import COLUMNS, Curve, aggregate_curves, final_values, mean_sd_se, read_table, write_table


def curves_of(random_runs, reverse_files=False):
    return [Curve(policy, list(reversed(files)) if reverse_files else files, "", "")
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
    table = aggregate_curves([Curve("cqb_opt", files)], ddof=0)
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
    curves = [Curve("cqb_eps", random_runs["cqb_opt"][0], "slack", "0.05"),
              Curve("cqb_eps", random_runs["random"][0], "slack", "0.1")]
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
    table = aggregate_curves([Curve("random", [path])])
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
        aggregate_curves([Curve("random", [a, b])])


def test_duplicate_seed_or_curve_is_refused(tmp_path):
    a = fabricate_run(tmp_path / "a.npz", [0, 1], [0, 0], seed=3)
    b = fabricate_run(tmp_path / "b.npz", [1, 1], [0, 0], seed=3)
    with pytest.raises(ValueError, match="same seed"):
        aggregate_curves([Curve("random", [a, b])])
    with pytest.raises(ValueError, match="given twice"):
        aggregate_curves([Curve("random", [a]), Curve("random", [b])])


def test_mean_sd_se_of_constant_columns():
    mean, sd, se = mean_sd_se(np.full((5, 3), 7))
    np.testing.assert_array_equal(mean, 7)
    np.testing.assert_array_equal(sd, 0)
    np.testing.assert_array_equal(se, 0)
    with pytest.raises(ValueError):
        mean_sd_se(np.empty((0, 3)))
