"""Hand-written mutants of the simulation core, each tried against the tests.

Plausible slips in cqb.sim's kernels (and the round loop's callers), each applied
to a scratch copy of ``src/`` (never this checkout: a running pipeline would
pick the mutant up), compiled there by the package's setup.py, and the core's
tests run on it. A mutant that no test kills is reported; it means a test is
missing. Prints the first test that failed for each mutant.

Usage: python -m bench.core_mutants [--keep] [--only WORD ...]   (from the repository root)
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TESTS = ["tests/test_sim_core.py", "tests/test_sim_estimation.py", "tests/test_sim_policies.py",
         "tests/test_sim_projection.py", "tests/test_sim_optimistic.py", "tests/test_sim_simulate.py",
         "tests/test_sim_parameters.py", "tests/test_sim_instances.py", "tests/test_sim_blas.py"]
KERNEL_SOURCES = tuple(f"src/cqb/sim/_{name}.py" for name in
                       ("algebra", "projection", "estimator", "scorer", "choosers", "rounds", "sampler", "blas"))
CORE = "the kernel that holds its text"  # a mutant's file, found by kernel_of

# (what the slip is, the file, the exact source text, its replacement)
MUTANTS = [
    ("round loop: departed jobs not dropped from the heap (no lazy deletion)", CORE,
     "while departed[heap_ids[0]]:", "while False:"),
    ("heap: pop sifts down to the smaller child", CORE,
     "if child + 1 < size and keys[child + 1] > keys[child]:", "if child + 1 < size and keys[child + 1] < keys[child]:"),
    ("oracle's heap: this round's arrival served before the service test", CORE,
     "        if size and u_in[t] <= heap_keys[0]:\n            size = heap_pop(heap_keys, heap_ids, size)\n"
     "        if a_in[t]:\n            size = heap_push(heap_keys, heap_ids, size, best_mean[next_id], next_id)\n"
     "            next_id += 1\n",
     "        if a_in[t]:\n            size = heap_push(heap_keys, heap_ids, size, best_mean[next_id], next_id)\n"
     "            next_id += 1\n        if size and u_in[t] <= heap_keys[0]:\n"
     "            size = heap_pop(heap_keys, heap_ids, size)\n"),
    ("oracle's heap: the service test against the last entry, not the top", CORE,
     "if size and u_in[t] <= heap_keys[0]:", "if size and u_in[t] <= heap_keys[size - 1]:"),
    ("round loop: the queue shifted from one past the served job", CORE,
     "for position in range(position, length - 1):", "for position in range(position + 1, length - 1):"),
    ("round loop: the new-arrival flag of this round's arrival, not the last round's", CORE,
     "t >= 2 and a_in[t - 2] != 0", "a_in[t - 1] != 0"),
    ("plugin loop: the new-arrival flag dropped", CORE,
     "self.policy.choose(t, self.queue_array[:length], bool(new_arrival))",
     "self.policy.choose(t, self.queue_array[:length], False)"),
    ("run_policy: the policy given other service coins than the trace's", "src/cqb/sim/simulate.py",
     "play_rounds(chooser, trace.arrivals, trace.service_uniforms,",
     "play_rounds(chooser, trace.arrivals, trace.service_uniforms[::-1],"),
    ("argmax: ties to the latest pair", CORE, "        if values[i] > best:", "        if values[i] >= best:"),
    ("argmax: NaN not preferred", CORE, "        if isnan(values[i]):\n            return i\n", ""),
    ("refresh: the last scored job left out of the search", CORE, "n_old = lo\n", "n_old = lo - 1 if lo > 0 else 0\n"),
    ("refresh: newcomers treated as scored", CORE,
     "elif fresh <= length and queue[length - fresh] == self.scored_until:", "elif fresh <= length:"),
    ("refresh: only the first arrival id range-checked", CORE,
     "        for i in range(length):\n            if not 0 <= queue[i] < self.n_contexts:",
     "        for i in range(1):\n            if not 0 <= queue[i] < self.n_contexts:"),
    ("learn: column not marked stale", CORE, "self._stale[server] = 1", "pass"),
    ("refresh: stale columns never refreshed", CORE, "if self._stale[k]:", "if False:"),
    ("score: bonus without β", CORE, "(self.bonus_scale * est._widths[k]) * sqrt(quad)", "self.bonus_scale * sqrt(quad)"),
    ("score: index written to the wrong server", CORE, "self._ucb[cell] = mean + bonus",
     "self._ucb[job * K + (k + 1) % K] = mean + bonus"),
    ("sparse quadratic form: a job's sum takes another entry", CORE,
     "inner += mat[mo + index[p] * d + index[q]] * x[xo + index[q]]",
     "inner += mat[mo + index[p] * d + index[q]] * x[xo + index[p]]"),
    ("forced exploration: round-robin starts one server late", CORE,
     "self.server = self.phase1_visits % K", "self.server = (self.phase1_visits + 1) % K"),
    ("forced exploration: phase 1 one round short", CORE, "            if t <= self.tau:", "            if t < self.tau:"),
    ("CQB-TS: noise not scaled by the bonus", CORE,
     "scorer._means[cell] + scorer._bonuses[cell] * scores[i * K + k]", "scorer._means[cell] + scores[i * K + k]"),
    ("Q-ThS: Beta arguments swapped", CORE,
     "self.rng.beta(self.successes + 1.0, self.trials - self.successes + 1.0)",
     "self.rng.beta(self.trials - self.successes + 1.0, self.successes + 1.0)"),
    ("Q-UCB: bonus √(ln²t/n) instead of √(ln²t/(2n))", CORE,
     "sqrt(squared_log / (2.0 * self._n[k]))", "sqrt(squared_log / self._n[k])"),
    ("schedule: one refit too many", CORE, "n + 1 if n < self.refit_min_samples", "n + 1 if n <= self.refit_min_samples"),
    ("schedule: growth ignored", CORE, "n + max(growth, 1)", "n + 1"),
    ("width: d instead of 2d", CORE, "(2.0 * self.dim) * log1p", "(1.0 * self.dim) * log1p"),
    ("width: S term dropped", CORE, "(sqrt(inner) + bound * sqrt(self.reg))", "(sqrt(inner))"),
    ("Newton: step added", CORE, "self._mle[to + a] -= self._grad[a]", "self._mle[to + a] += self._grad[a]"),
    ("Newton: gradient without the ridge", CORE, "grad[a] = reg * theta[to + a]", "grad[a] = 0.0"),
    ("online step: sign of the residual", CORE, "(prob - outcome) * self._hx[a]", "(outcome - prob) * self._hx[a]"),
    ("Sherman–Morrison: H⁻¹ weight ignored", CORE, "1.0 / sqrt(1.0 / weight\n",
     "1.0 / sqrt(1.0\n"),
    ("Sherman–Morrison: V⁻¹ not updated", CORE, "algebra.subtract_outer(self._inv, vo, self._u, d)", "pass"),
    ("inverse: diagonal term of the product skipped", CORE, "s = dot(at(y), i * d + j, at(y), j * d + j, d - j)",
     "s = dot(at(y), i * d + j + 1, at(y), j * d + j + 1, d - j - 1)"),
    ("Hessian: diagonal ridge dropped", CORE, "h[a * d + a] += reg", "h[a * d + a] += 0.0"),
    ("Gram matrix: lower triangle not mirrored", CORE, "mat[b * d + a] = mat[a * d + b]", "mat[b * d + a] = 0.0"),
    ("non-zeros: negative entries dropped", CORE, "if x[xo + a] != 0.0:", "if x[xo + a] > 0.0:"),
    ("dot: last element skipped", CORE, "    while j < n:", "    while j + 1 < n:"),
    ("ball: projection never applied", CORE, "self.project(k, norm, bound)", "pass"),
    ("V⁻¹ started from λ₀I instead of κλ₀I", CORE, "self.inverses[:, 0] = np.eye(d) / self.ridge",
     "self.inverses[:, 0] = np.eye(d) / self.reg"),
    ("Filippi: returns its (radial) start", CORE, "        if it >= max_iter:\n            return False",
     "        if True:\n            return False"),
    ("Filippi: KKT residual with the multiplier's sign flipped", CORE,
     "component = p.grad[a] + 2.0 * nu * theta[to + a]", "component = p.grad[a] - 2.0 * nu * theta[to + a]"),
    ("Filippi: stops on step length again (a step shorter than 1e-7, or 39 halvings)", CORE,
     "        for a in range(d):\n            theta[to + a] = p.trial[a]\n        value = trial_value\n",
     "        step = 0.0\n        for a in range(d):\n            step += (p.trial[a] - theta[to + a]) ** 2\n"
     "            theta[to + a] = p.trial[a]\n        value = trial_value\n"
     "        if sqrt(step) <= 1e-7 * (1.0 + bound) or alpha < 1e-11:\n            p.steps = it\n            return True\n"),
    ("Filippi: the solver's status ignored by the estimator", CORE,
     "                self.projection_unconverged += 1", "                pass"),
    ("Filippi: the wrapper reports every solve converged", CORE,
     "return theta, bool(converged), int(work.steps)", "return theta, True, int(work.steps)"),
    ("Filippi: line search blind to the objective's rounding", CORE, "PROJECTION_NOISE = 1e-13", "PROJECTION_NOISE = 0.0"),
    ("round loop: signals never asked for", CORE, "if cython.compiled and t % SIGNAL_CHECK_ROUNDS == 0:",
     "if False:"),
    ("scorer cache: rows keyed by their first entry only", CORE,
     "                if words[row * d + j] != words[i * d + j]:",
     "                if j == 0 and words[row * d + j] != words[i * d + j]:"),
    ("scorer cache: an occupied slot of the row keys taken for the same row", CORE,
     "                if words[row * d + j] != words[i * d + j]:", "                if False:"),
    ("sampler: the uniforms not scaled to (−1, 1)", CORE,
     "row[j] = -1.0 + 2.0 * bits.next_double(bits.state)", "row[j] = -1.0 + bits.next_double(bits.state)"),
    ("sampler: a draw at the low cut kept as undecided", CORE,
     "code = 1 if best >= high else 0 if best <= low else 2", "code = 1 if best >= high else 0 if best < low else 2"),
    ("sampler: the kept rows' buffer not followed when it grows", CORE,
     "                    kept = kept_array.reshape(-1)\n", ""),
    ("BLAS threshold one too high", CORE, "if d < BLAS_MIN_DIM or", "if d <= BLAS_MIN_DIM or"),
    ("sparse M x: a non-zero's row taken at the wrong offset", CORE, "row = mo + index[p] * d", "row = mo + index[p]"),
    ("BLAS: the Gram sum into the other triangle (dsyrk's uplo)", CORE, 'dsyrk(b"L"', 'dsyrk(b"U"'),
    ("BLAS: the inverse read transposed from LAPACK's triangle", CORE, "s = y[i * d + j]", "s = y[j * d + i]"),
    ("BLAS: the factor's upper part left as the matrix's", CORE, "l[i * d + j] = 0.0\n        return True",
     "pass\n        return True"),
    ("BLAS: M += u uᵀ", CORE, "minus: cython.double = -1.0", "minus: cython.double = 1.0"),
]


def build(root: Path) -> None:
    """Compile the scratch copy's core in place by the package's own setup.py
    (its flags, its build record). --force: a skipped rebuild would leave the
    last binary, which cqb then refuses (its record no longer matches the
    source), and a mutant would pass as killed."""
    done = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace", "--force"], cwd=root,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"build failed:\n{done.stderr[-3000:]}")


def kernel_of(mutant: tuple, sources: dict) -> tuple:
    """The mutant with CORE replaced by the kernel source that holds its text."""
    description, path, old, new = mutant
    if path == CORE:
        holders = [kernel for kernel in KERNEL_SOURCES if sources[kernel].count(old) == 1]
        if len(holders) != 1:
            raise SystemExit(f"mutant {description!r}: its source text is in {len(holders)} kernels (once in each)")
        path = holders[0]
    return description, path, old, new


def first_failure(output: str) -> str:
    match = re.search(r"^(?:FAILED|ERROR) (\S+)", output, re.MULTILINE)
    return match.group(1) if match else "(no test named)"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    parser.add_argument("--only", nargs="+", help="run only the mutants whose description contains one of these")
    args = parser.parse_args(argv)
    kernels = {kernel: (REPO / kernel).read_text() for kernel in KERNEL_SOURCES}
    mutants = [kernel_of(m, kernels) for m in MUTANTS if args.only is None or any(word in m[0] for word in args.only)]
    # mutants of Python files first: they run on the pristine build
    mutants.sort(key=lambda m: m[1] in KERNEL_SOURCES)
    scratch = Path(tempfile.mkdtemp(prefix="cqb_core_mutants_"))
    survivors = []
    try:
        shutil.copytree(REPO / "src", scratch / "src", ignore=shutil.ignore_patterns("*.so", "*.sha256", "__pycache__"))
        for name in ("setup.py", "pyproject.toml", "README.md"):  # what setup.py reads
            shutil.copy2(REPO / name, scratch / name)
        shutil.copytree(REPO / "tests", scratch / "tests", ignore=shutil.ignore_patterns("__pycache__"))
        pristine = {path: (scratch / path).read_text() for path in {m[1] for m in mutants} | set(KERNEL_SOURCES)}
        env = {"PYTHONPATH": str(scratch / "src"), "PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1",
               "OPENBLAS_NUM_THREADS": "1"}
        built = None  # the kernels' texts the current build is of
        for description, path, old, new in [("(none: the tests must pass)", KERNEL_SOURCES[0], "", "")] + mutants:
            if old and pristine[path].count(old) != 1:
                raise SystemExit(f"mutant {description!r}: its source text occurs {pristine[path].count(old)} times")
            for other, text in pristine.items():
                (scratch / other).write_text(text.replace(old, new) if other == path and old else text)
            core_text = [(scratch / kernel).read_text() for kernel in KERNEL_SOURCES]
            if core_text != built:
                build(scratch)
                built = core_text
            result = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                                     "-m", "not slow and not slurm", *TESTS],
                                    cwd=scratch, env=env, capture_output=True, text=True)
            killed = result.returncode != 0
            if not old:
                if killed:
                    print(result.stdout[-3000:])
                    raise SystemExit("the unmutated core fails its tests")
                print("unmutated core: tests pass", flush=True)
                continue
            print(f"{'killed  ' if killed else 'SURVIVED'} {description}"
                  + (f"  <- {first_failure(result.stdout)}" if killed else ""), flush=True)
            if not killed:
                survivors.append(description)
    finally:
        if not args.keep:
            shutil.rmtree(scratch)
    print(f"{len(mutants) - len(survivors)} of {len(mutants)} mutants killed")
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
