"""Every output the package writes goes through cqb.sim.runfile.atomic_write and gets the umask's mode.

mkstemp creates its file 0600; left as is, run files, tables, figures and
processed data would be unreadable to collaborators sharing a results folder.
"""

from __future__ import annotations

import os
import stat

import numpy as np
import pandas as pd
import pytest

from cqb.sim.runfile import atomic_write, save_run
from cqb.sim.simulate import RunResult

# umask → mode of a new output file, as open(path, "w") would give it.
UMASK_MODES = {0o022: 0o644, 0o077: 0o600, 0o002: 0o664}


@pytest.fixture(params=sorted(UMASK_MODES), ids=lambda mask: f"umask{mask:03o}")
def umask(request):
    previous = os.umask(request.param)
    yield request.param
    os.umask(previous)


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def _write_run(path):
    queue = np.array([0, 1, 2, 1], dtype=np.int64)
    save_run(path, RunResult(queue=queue, oracle_queue=queue, gap=np.zeros(4),
                             explored=np.zeros(4, dtype=bool), metadata={"seed": 0}))


def _write_table(path):
    from cqb.analysis.aggregate import write_table

    write_table(pd.DataFrame({"t": [1, 2], "mean": [0.5, 1.5]}), path)


def _write_figure(path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from cqb.figures.plotting import save_figure

    figure, axes = plt.subplots()
    axes.plot([0, 1], [0, 1])
    if path.suffix == ".pdf":
        save_figure(figure, pdf=path)
    else:
        save_figure(figure, png=path)


def _write_features(path):
    from cqb.data import save_features

    save_features(path, np.eye(2), np.array([0, 1]), ["a", "b"], {"dataset": "test"})


def _write_instance(path):
    from cqb.data import save_pool

    save_pool(path, np.eye(2) * 0.5, np.ones((2, 2)), np.array([0, 1]), {"instance": {}})


def _write_report(path):
    from cqb.io.files import atomic_write_text

    atomic_write_text(path, "{}\n")


def _write_fetched(path):
    from cqb.data import fetch_file, file_digest

    source = path.parent.parent / "source.csv"
    source.write_text("a,b\n1,2\n")
    fetch_file(source.as_uri(), path, file_digest(source))


WRITERS = {
    "run.npz": _write_run,
    "table.tsv": _write_table,
    "figure.pdf": _write_figure,
    "figure.png": _write_figure,
    "features.npz": _write_features,
    "instance.npz": _write_instance,
    "report.json": _write_report,
    "raw.csv": _write_fetched,
}


@pytest.mark.parametrize("name", WRITERS)
def test_output_mode_follows_the_umask(tmp_path, umask, name):
    path = tmp_path / "out" / name
    WRITERS[name](path)
    assert _mode(path) == UMASK_MODES[umask], f"{name}: mode {_mode(path):03o} under umask {umask:03o}"


def test_atomic_write_leaves_the_umask_unchanged(tmp_path, umask):
    with atomic_write(tmp_path / "x") as temporary:
        temporary.write_text("x")
    assert os.umask(umask) == umask


def test_failed_write_leaves_nothing(tmp_path):
    target = tmp_path / "out.txt"
    with pytest.raises(RuntimeError):
        with atomic_write(target) as temporary:
            temporary.write_text("partial")
            raise RuntimeError("interrupted")
    assert list(tmp_path.iterdir()) == []
