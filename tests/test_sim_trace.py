"""Trace files: a run on a seed's trace file is the run that draws the trace
itself, every round; a trace that does not belong to the run, is stale or
corrupt is one error line naming the file."""

import json
import zipfile

import numpy as np
import pytest

import cqb.sim.trace as tracefile
from cqb.cli import main
from cqb.policies import builtin_policies
from cqb.sim.runfile import load_run
from cqb.sim.simulate import draw, simulate
from cqb.sim.trace import load_trace, save_trace

SMALL = {"kind": "synthetic", "n_servers": 3, "dim": 3, "arrival_rate": 0.6, "slack": 0.15}
WIDE = {"kind": "synthetic", "n_servers": 5, "dim": 20, "arrival_rate": 0.7, "slack": 0.1}


@pytest.fixture
def pool_spec(tmp_path):
    rng = np.random.default_rng(3)
    contexts = rng.uniform(-1, 1, size=(60, 12))
    contexts /= np.linalg.norm(contexts, axis=1, keepdims=True)
    np.savez(tmp_path / "pool.npz", contexts=contexts, theta=rng.uniform(-1, 1, size=(4, 12)))
    return {"kind": "pool", "pool": str(tmp_path / "pool.npz"), "arrival_rate": 0.4}


def _write_trace(path, spec, horizon, seed):
    instance, spec, trace, oracle_path = draw(spec, horizon, seed)
    return save_trace(path, instance, spec, horizon, seed, trace, oracle_path)


def _same_run(a, b):
    for key in ("queue", "oracle_queue", "gap", "explored"):
        np.testing.assert_array_equal(getattr(a, key), getattr(b, key), err_msg=key)
    assert a.metadata == b.metadata


@pytest.mark.parametrize("policy", sorted(builtin_policies()))
@pytest.mark.parametrize("which", ["small", "wide", "pool"])
def test_a_run_on_the_trace_file_is_the_run_that_draws_it(tmp_path, pool_spec, policy, which):
    """Every round: what the policy and the oracle consumed (arrivals, the
    flags they saw, the jobs served, the service uniforms, the contexts), the
    queue paths, gaps and the run's metadata, trace hash included."""
    spec = {"small": SMALL, "wide": WIDE, "pool": pool_spec}[which]
    horizon, seed = 400, 5
    digest = _write_trace(tmp_path / "trace.npz", spec, horizon, seed)
    drawn_record, read_record = {}, {}
    params = {"tau": 60} if policy in ("cqb_eps", "cqb_eta2") else None  # short phase 1 at T = 400
    if policy == "cqb_eta2" and which == "pool":  # no nominal slack to derive them from
        params.update(eta=0.1, cutoff=50)
    drawn = simulate(spec, policy, params, horizon, seed, drawn_record)
    read = simulate(spec, policy, params, horizon, seed, read_record, trace_file=tmp_path / "trace.npz")
    _same_run(drawn, read)
    assert read.metadata["trace_hash"] == digest
    for side in ("policy", "oracle"):
        assert drawn_record[side].keys() == read_record[side].keys()
        for key, value in drawn_record[side].items():
            np.testing.assert_array_equal(np.asarray(value), np.asarray(read_record[side][key]), err_msg=key)
    # without a record the oracle's queue comes from the trace file itself
    _same_run(simulate(spec, policy, params, horizon, seed),
              simulate(spec, policy, params, horizon, seed, trace_file=tmp_path / "trace.npz"))


def test_the_trace_file_stores_pool_rows_and_synthetic_contexts(tmp_path, pool_spec):
    _write_trace(tmp_path / "pool_trace.npz", pool_spec, 300, 1)
    _write_trace(tmp_path / "synthetic_trace.npz", SMALL, 300, 1)
    with np.load(tmp_path / "pool_trace.npz") as pool, np.load(tmp_path / "synthetic_trace.npz") as synthetic:
        assert pool["contexts"].size == 0 and pool["context_rows"].size > 0
        assert synthetic["context_rows"].size == 0 and synthetic["contexts"].shape[1] == 3
        assert "service_uniforms" not in synthetic.files  # drawn again on loading


def test_different_seeds_give_different_trace_hashes(tmp_path):
    assert _write_trace(tmp_path / "a.npz", SMALL, 300, 1) != _write_trace(tmp_path / "b.npz", SMALL, 300, 2)


def _rewrite(path, **changes):
    with np.load(path) as data:
        arrays = {key: data[key] for key in data.files}
    arrays.update(changes)
    np.savez(path, **arrays)


@pytest.mark.parametrize("spec, horizon, seed, needle", [
    (dict(SMALL, slack=0.1), 300, 1, "was drawn for instance"),
    (SMALL, 301, 1, "T = 300, seed 1, not for this run's instance .* T = 301"),
    (SMALL, 300, 2, "seed 1, not for this run's instance .* seed 2"),
])
def test_a_trace_of_another_run_is_refused(tmp_path, spec, horizon, seed, needle):
    _write_trace(tmp_path / "trace.npz", SMALL, 300, 1)
    with pytest.raises(ValueError, match=needle):
        load_trace(tmp_path / "trace.npz", spec, horizon, seed)


def test_a_stale_or_corrupt_trace_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "trace.npz"
    _write_trace(path, SMALL, 300, 1)
    with np.load(path) as data:
        contexts, metadata = data["contexts"].copy(), json.loads(str(data["metadata"]))
    contexts[0, 0] = np.nextafter(contexts[0, 0], 2.0)
    _rewrite(path, contexts=contexts)
    with pytest.raises(ValueError, match="is corrupt: its content hash"):
        load_trace(path, SMALL, 300, 1)
    _write_trace(path, SMALL, 300, 1)
    monkeypatch.setattr(tracefile, "simulation_code_hash", lambda: "0123456789abcdef")
    with pytest.raises(ValueError, match=f"is stale: drawn by simulation code {metadata['code_hash']}, "
                                         "this is 0123456789abcdef"):
        load_trace(path, SMALL, 300, 1)


def test_a_truncated_or_foreign_file_is_refused(tmp_path):
    path = tmp_path / "trace.npz"
    _write_trace(path, SMALL, 300, 1)
    (tmp_path / "cut.npz").write_bytes(path.read_bytes()[:500])
    with pytest.raises(ValueError, match="cut.npz is corrupt or truncated"):
        load_trace(tmp_path / "cut.npz", SMALL, 300, 1)
    np.savez(tmp_path / "other.npz", queue=np.zeros(3))
    with pytest.raises(ValueError, match=r"other.npz is not a trace file: it lacks \['context_rows'"):
        load_trace(tmp_path / "other.npz", SMALL, 300, 1)
    assert zipfile.is_zipfile(path)


def test_a_trace_of_a_pool_that_changed_is_refused(tmp_path, pool_spec):
    path = tmp_path / "trace.npz"
    _write_trace(path, pool_spec, 300, 1)
    with np.load(pool_spec["pool"]) as data:
        contexts, theta = data["contexts"], data["theta"]
    np.savez(pool_spec["pool"], contexts=contexts, theta=theta * 0.5)
    with pytest.raises(ValueError, match="is stale: its θ\\* is not that of the pool"):
        load_trace(path, pool_spec, 300, 1)


def test_cli_draws_a_trace_and_plays_on_it(tmp_path, capsys):
    spec = json.dumps(SMALL)
    common = ["--instance-spec", spec, "--horizon", "300", "--seed", "4"]
    assert main(["run", "--draw-trace", *common, "--out", str(tmp_path / "trace.npz")]) == 0
    assert main(["run", "--policy", "cqb_opt", *common, "--trace", str(tmp_path / "trace.npz"),
                 "--out", str(tmp_path / "read.npz")]) == 0
    assert main(["run", "--policy", "cqb_opt", *common, "--out", str(tmp_path / "drawn.npz")]) == 0
    read, drawn = load_run(tmp_path / "read.npz"), load_run(tmp_path / "drawn.npz")
    for key in ("queue", "oracle_queue", "gap", "explored", "metadata"):
        np.testing.assert_array_equal(read[key], drawn[key])
    capsys.readouterr()
    # a trace of another seed: one line, exit 2, no run file
    assert main(["run", "--policy", "cqb_opt", "--instance-spec", spec, "--horizon", "300", "--seed", "5",
                 "--trace", str(tmp_path / "trace.npz"), "--out", str(tmp_path / "other.npz")]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("cqb: error: trace file ") and "\n" not in error
    assert not (tmp_path / "other.npz").exists()
    assert main(["run", "--draw-trace", "--policy", "cqb_opt", *common, "--out", str(tmp_path / "t.npz")]) == 2
    assert main(["run", *common, "--out", str(tmp_path / "t.npz")]) == 2
    assert "needs --policy" in capsys.readouterr().err


# ------------------------------------------------------------------ the trace cache (cqb run --trace-cache)

COMMON = ["--instance-spec", json.dumps(SMALL), "--horizon", "300", "--seed", "4"]


def _cli_run(tmp_path, capsys, name, *trace_args):
    """`cqb run --policy cqb_opt` on COMMON with ``trace_args``: (exit code, stderr lines)."""
    capsys.readouterr()
    code = main(["run", "--policy", "cqb_opt", *COMMON, *trace_args, "--out", str(tmp_path / name)])
    return code, capsys.readouterr().err.splitlines()


def _same_run_file(a, b):
    a, b = load_run(a), load_run(b)
    for key in ("queue", "oracle_queue", "gap", "explored"):
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    assert a["metadata"] == b["metadata"]


def _identity(path):
    stat = path.stat()
    return stat.st_ino, stat.st_mtime_ns, stat.st_size


def _no_drawing(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the trace was drawn")

    monkeypatch.setattr("cqb.sim.simulate.draw", refuse)


def test_a_missing_trace_cache_is_drawn_written_and_gives_the_run_of_the_other_ways(tmp_path, capsys):
    cache = tmp_path / "traces" / "T300" / "seed4.npz"  # its folder made as it is written
    code, err = _cli_run(tmp_path, capsys, "cached.npz", "--trace-cache", str(cache))
    assert code == 0, err
    assert not any("trace cache" in line for line in err)  # a missing cache is no news
    assert main(["run", "--draw-trace", *COMMON, "--out", str(tmp_path / "trace.npz")]) == 0
    assert _cli_run(tmp_path, capsys, "read.npz", "--trace", str(tmp_path / "trace.npz"))[0] == 0
    assert _cli_run(tmp_path, capsys, "drawn.npz")[0] == 0
    _same_run_file(tmp_path / "cached.npz", tmp_path / "drawn.npz")
    _same_run_file(tmp_path / "cached.npz", tmp_path / "read.npz")
    assert load_trace(cache, SMALL, 300, 4)[3] == load_run(tmp_path / "cached.npz")["metadata"]["trace_hash"]
    assert load_trace(cache, SMALL, 300, 4)[3] == load_trace(tmp_path / "trace.npz", SMALL, 300, 4)[3]
    assert [path.name for path in cache.parent.iterdir()] == ["seed4.npz"]  # no temporary left


def test_a_present_trace_cache_is_read_not_drawn(tmp_path, capsys, monkeypatch):
    cache = tmp_path / "seed4.npz"
    assert _cli_run(tmp_path, capsys, "first.npz", "--trace-cache", str(cache))[0] == 0
    before = _identity(cache)
    _no_drawing(monkeypatch)
    code, err = _cli_run(tmp_path, capsys, "second.npz", "--trace-cache", str(cache))
    assert code == 0, err
    assert not any("trace cache" in line for line in err)
    assert _identity(cache) == before
    _same_run_file(tmp_path / "first.npz", tmp_path / "second.npz")


@pytest.mark.parametrize("stale", ["code", "seed", "horizon"])
def test_a_stale_trace_cache_is_drawn_again_and_replaced(tmp_path, capsys, monkeypatch, stale):
    cache = tmp_path / "seed4.npz"
    with monkeypatch.context() as patch:
        if stale == "code":
            patch.setattr(tracefile, "simulation_code_hash", lambda: "0123456789abcdef")
        _write_trace(cache, SMALL, 301 if stale == "horizon" else 300, 5 if stale == "seed" else 4)
    before = _identity(cache)
    code, err = _cli_run(tmp_path, capsys, "cached.npz", "--trace-cache", str(cache))
    assert code == 0, err
    (line,) = [line for line in err if "trace cache" in line]
    assert line.startswith(f"cqb: trace cache {cache} ") and line.endswith(": drawing it again")
    assert {"code": "drawn by simulation code 0123456789abcdef", "seed": "seed 5, not for",
            "horizon": "T = 301, seed 4, not for"}[stale] in line
    assert _identity(cache) != before
    load_trace(cache, SMALL, 300, 4)  # now this run's trace
    assert _cli_run(tmp_path, capsys, "drawn.npz")[0] == 0
    _same_run_file(tmp_path / "cached.npz", tmp_path / "drawn.npz")


def _flip_a_context(path):
    with np.load(path) as data:
        contexts = data["contexts"].copy()
    contexts[0, 0] = np.nextafter(contexts[0, 0], 2.0)
    _rewrite(path, contexts=contexts)


@pytest.mark.parametrize("damage, needle", [
    (lambda path: path.write_bytes(path.read_bytes()[:500]), "is corrupt or truncated"),
    (_flip_a_context, "is corrupt: its content hash"),
])
def test_a_corrupt_trace_cache_is_drawn_again_with_one_warning_line(tmp_path, capsys, damage, needle):
    """A cache's content is a function of its key: a corrupt one is redrawn,
    as a stale one is; the same file given by hand (--trace) stays an error."""
    cache = tmp_path / "seed4.npz"
    _write_trace(cache, SMALL, 300, 4)
    damage(cache)
    code, err = _cli_run(tmp_path, capsys, "given.npz", "--trace", str(cache))
    assert code == 2 and len(err) == 1 and err[0].startswith(f"cqb: error: trace file {cache} ") and needle in err[0]
    assert not (tmp_path / "given.npz").exists()
    code, err = _cli_run(tmp_path, capsys, "cached.npz", "--trace-cache", str(cache))
    assert code == 0, err
    (line,) = [line for line in err if "trace cache" in line]
    assert line.startswith(f"cqb: trace cache {cache} ") and needle in line and line.endswith(": drawing it again")
    load_trace(cache, SMALL, 300, 4)  # replaced by this run's trace
    assert _cli_run(tmp_path, capsys, "drawn.npz")[0] == 0
    _same_run_file(tmp_path / "cached.npz", tmp_path / "drawn.npz")


def test_a_trace_cache_that_fails_mid_write_leaves_no_file_and_the_run_plays_on(tmp_path, capsys, monkeypatch):
    """The write is atomic: a cache whose write fails half-way (a full disk)
    leaves nothing a later job could read; this run plays on the trace it drew."""
    import errno

    real = np.lib.format.write_array
    calls = []

    def full_disk_once(member, array, **options):
        calls.append(1)
        if len(calls) > 1:
            return real(member, array, **options)
        member.write(b"\x93NUMPY half an array")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(np.lib.format, "write_array", full_disk_once)
    cache = tmp_path / "traces" / "seed4.npz"
    code, err = _cli_run(tmp_path, capsys, "cached.npz", "--trace-cache", str(cache))
    assert code == 0, err
    assert [line for line in err if "trace cache" in line] == [
        f"cqb: warning: cannot write the trace cache {cache}: No space left on device"]
    assert list(cache.parent.iterdir()) == []
    monkeypatch.setattr(np.lib.format, "write_array", real)
    assert _cli_run(tmp_path, capsys, "drawn.npz")[0] == 0
    _same_run_file(tmp_path / "cached.npz", tmp_path / "drawn.npz")


def test_the_trace_options_exclude_each_other(tmp_path, capsys):
    for options in (["--trace", "a.npz", "--trace-cache", "b.npz"], ["--draw-trace", "--trace-cache", "b.npz"]):
        with pytest.raises(SystemExit) as stopped:
            main(["run", "--policy", "cqb_opt", *COMMON, *options, "--out", str(tmp_path / "run.npz")])
        assert stopped.value.code == 2
        assert "not allowed with argument" in capsys.readouterr().err
    with pytest.raises(ValueError, match="not both"):
        simulate(SMALL, "cqb_opt", None, 300, 4, trace_file="a.npz", trace_cache="b.npz")
