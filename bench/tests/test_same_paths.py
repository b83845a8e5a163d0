"""bench.same_paths: which stored arrays of two run outputs differ, and its table."""

import numpy as np

from bench.same_paths import comparison_table, differing


def _save(path, **changes):
    arrays = {"queue": np.array([0, 1, 2]), "oracle_queue": np.array([0, 1, 1]),
              "gap": np.array([np.nan, 0.1, 0.0]), "explored": np.array([False, True, False])}
    arrays.update(changes)
    np.savez(path, **arrays)
    return path


def test_the_same_arrays_with_nan_gaps_do_not_differ(tmp_path):
    assert differing(_save(tmp_path / "a.npz"), _save(tmp_path / "b.npz")) == []


def test_a_last_bit_or_a_shape_differs(tmp_path):
    old = _save(tmp_path / "a.npz")
    assert differing(old, _save(tmp_path / "b.npz", gap=np.array([np.nan, np.nextafter(0.1, 1.0), 0.0]))) == ["gap"]
    assert differing(old, _save(tmp_path / "c.npz", queue=np.array([0, 1]))) == ["queue"]


def test_the_table_counts_per_policy_and_names_the_differing_runs():
    jobs = [{"policy": "cqb_opt", "seed": 1, "horizon": 500}, {"policy": "cqb_opt", "seed": 2, "horizon": 500},
            {"policy": "q_ucb", "seed": 3, "horizon": 500}]
    rows = comparison_table(jobs, [[], ["gap"], []])
    assert rows[2] == "| cqb_opt | 2 | 1 | seed 2, T = 500 (gap) |"
    assert rows[3] == "| q_ucb | 1 | 1 | – |"
    assert rows[4] == "| **all** | 3 | 2 | seed 2, T = 500 (gap) |"
