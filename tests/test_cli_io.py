import os
import signal
import subprocess
import sys

import numpy as np
import pytest

from cqb.cli import main
from cqb.io import atomic_write, load_run


def test_cli_runs_and_writes_run_file(tmp_path, capsys):
    out = tmp_path / "runs" / "r.npz"
    assert main(["run", "--policy", "cqb_opt", "--seed", "1", "--horizon", "200",
                 "--n-servers", "3", "--dim", "3", "--set", "bonus_scale=0.05", "--out", str(out)]) == 0
    run = load_run(out)
    assert run["queue"].shape == (200,) and run["queue"].dtype == np.int64
    meta = run["metadata"]
    assert meta["policy"] == "cqb_opt" and meta["seed"] == 1 and meta["horizon"] == 200
    assert meta["policy_params"]["bonus_scale"] == 0.05
    assert meta["policy_params"]["norm_bound"] == pytest.approx(3 ** 0.5)
    assert meta["package_version"] and len(meta["code_hash"]) == 16
    assert [p.name for p in out.parent.iterdir()] == ["r.npz"]  # no temp file left


def test_cli_lists_policies(capsys):
    assert main(["policies"]) == 0
    listing = capsys.readouterr().out
    for name in ("cqb_eps", "cqb_opt", "q_ths", "cqb_eta2", "bonus_scale"):
        assert name in listing


def test_cli_help_lists_policies():
    result = subprocess.run([sys.executable, "-m", "cqb.cli", "run", "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "cqb_eps_opt" in result.stdout and "--set" in result.stdout


@pytest.mark.parametrize("args,needle", [
    (["--policy", "nope"], "'nope'"),
    (["--policy", "random", "--arrival-rate", "1.5"], "1.5"),
    (["--policy", "random", "--horizon", "0"], "horizon"),
    (["--policy", "cqb_opt", "--set", "colour=3"], "colour"),
])
def test_cli_bad_input_names_the_value(tmp_path, capsys, args, needle):
    out = tmp_path / "x.npz"
    assert main(["run", "--seed", "0", "--out", str(out)] + args) == 2
    assert needle in capsys.readouterr().err
    assert not out.exists()


def test_atomic_write_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "out.npz"
    with pytest.raises(RuntimeError):
        with atomic_write(target) as temporary:
            temporary.write_bytes(b"half")
            raise RuntimeError("interrupted")
    assert list(tmp_path.iterdir()) == []


def test_run_killed_mid_simulation_exits_by_sigkill_and_leaves_no_file(tmp_path):
    out = tmp_path / "killed.npz"
    process = subprocess.Popen([sys.executable, "-m", "cqb.cli", "run", "--policy", "cqb_opt", "--seed", "0",
                                "--horizon", "200000", "--out", str(out)])
    try:
        process.wait(timeout=3)
    except subprocess.TimeoutExpired:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    # The run must still have been going when killed (T = 200000 takes minutes);
    # an early exit or crash would leave no file without testing anything.
    assert process.returncode == -signal.SIGKILL
    assert not out.exists()
    assert [p for p in tmp_path.iterdir()] == []
