"""Hand-written mutants of the compiled kernel, each tried against the tests.

mutmut mutates Python only, so the C kernel gets these: plausible slips, each
applied to a scratch copy of ``src/`` (never this checkout: a running pipeline
would pick the mutant up), compiled there, and the kernel's tests run on it.
A mutant that no test kills is reported; it means a test is missing.

Usage: python -m cqb.bench.kernel_mutants [--keep]      (from the repository root)
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
TESTS = ["tests/test_sim_kernel.py", "tests/test_sim_optimistic.py", "tests/test_sim_estimation.py"]

# (what the slip is, the exact source text, its replacement)
MUTANTS = [
    ("argmax: ties to the latest pair", "if (value > best) { best = value;", "if (value >= best) { best = value;"),
    ("argmax: NaN not preferred", "if (isnan(value)) { best_position = i; best_server = k; goto done; }", ""),
    # (Searching for the first id > scored_until instead of ≥ only scores one row twice: equivalent.)
    ("refresh: the last scored job left out of the search", "        n_old = lo;\n", "        n_old = lo > 0 ? lo - 1 : 0;\n"),
    ("refresh: newcomers treated as scored", "else if (fresh <= length && queue[length - fresh] == self->scored_until)",
     "else if (fresh <= length)"),
    ("refresh: only the first arrival id range-checked", "for (Py_ssize_t i = 0; i < length; i++)\n        if (queue[i] < 0",
     "for (Py_ssize_t i = 0; i < 1; i++)\n        if (queue[i] < 0"),
    ("update_job: column not marked stale", "    self->stale[k] = 1;\n", "\n"),
    ("refresh: stale flag never cleared, column never refreshed", "if (!self->stale[k]) continue;", "continue;"),
    ("schedule: one refit too many", "n < self->refit_min_samples ? n + 1", "n <= self->refit_min_samples ? n + 1"),
    ("schedule: growth ignored", "n + (growth > 1 ? growth : 1)", "n + 1"),
    ("width: d instead of 2d", "(double)(2 * self->dim) * log1p", "(double)(self->dim) * log1p"),
    ("width: S term dropped", "(sqrt(inner) + norm_bound * sqrt(self->reg))", "(sqrt(inner))"),
    ("Newton: step added", "theta[a] -= grad[a];", "theta[a] += grad[a];"),
    ("Newton: gradient without the ridge", "grad[a] = self->reg * theta[a];", "grad[a] = 0.0;"),
    ("online step: sign of the residual", "double residual = prob - outcome;", "double residual = outcome - prob;"),
    ("Sherman–Morrison: H⁻¹ weight ignored", "1.0 / sqrt(1.0 / weight + dot(uh, x, d))",
     "1.0 / sqrt(1.0 + dot(uh, x, d))"),
    ("Sherman–Morrison: V⁻¹ not updated", "for (Py_ssize_t b = 0; b < d; b++) v_inv[a * d + b] -= u[a] * u[b];", ""),
    # (Starting that sum at i ≤ j only adds zeros of the triangular L⁻¹: equivalent.)
    ("inverse: diagonal term of the product skipped", "for (Py_ssize_t m = j; m < d; m++) s += out[m * d + i]",
     "for (Py_ssize_t m = j + 1; m < d; m++) s += out[m * d + i]"),
    ("Gram matrix: diagonal ridge dropped", "h[a * d + a] += diag_add;", ""),
    ("Gram matrix: lower triangle not mirrored", "for (Py_ssize_t b = a + 1; b < d; b++) h[b * d + a] = h[a * d + b];",
     ""),
    ("non-zeros: negative entries dropped", "if (x[a] != 0.0) index[m++] = a;", "if (x[a] > 0.0) index[m++] = a;"),
    ("dot: last element skipped", "for (; i < n; i++) s0 += a[i] * b[i];", "for (; i + 1 < n; i++) s0 += a[i] * b[i];"),
    ("ball: projection never requested", "flags |= OUTSIDE_BALL;", "flags |= 0;"),
    ("refit: V⁻¹ rebuilt without the ridge", "weighted_gram(x, NULL, n, d, self->ridge, h, self->index);",
     "weighted_gram(x, NULL, n, d, self->reg, h, self->index);"),
    ("score4: a job's sum takes another job's entry", "q3 += i3 * x3[a];", "q3 += i3 * x2[a];"),
    ("score4: block written to the wrong server", "self->ucb[jobs[j] * K + k] = mean + bonus;",
     "self->ucb[jobs[j] * K + (k + 1) % K] = mean + bonus;"),
    ("refresh: leftovers of a block never scored", "for (Py_ssize_t j = 0; j < filled; j++) score(self, block[j], k);",
     ""),
    ("score: bonus without β", "(self->bonus_scale * self->widths[k]) * sqrt(quad)", "self->bonus_scale * sqrt(quad)"),
]


def build(root: Path) -> None:
    """Compile the scratch copy's kernel in place by the package's own setup.py:
    its flags and the source hash baked into the module, as `pip install` builds it.
    --force: a skipped rebuild would leave the last binary, which cqb then refuses
    (its baked hash no longer matches the source), and a mutant would pass as killed."""
    done = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace", "--force"], cwd=root,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"build failed:\n{done.stderr[-3000:]}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="cqb_kernel_mutants_"))
    survivors = []
    try:
        shutil.copytree(REPO / "src", scratch / "src", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
        for name in ("setup.py", "pyproject.toml", "README.md"):  # what setup.py reads
            shutil.copy2(REPO / name, scratch / name)
        shutil.copytree(REPO / "tests", scratch / "tests", ignore=shutil.ignore_patterns("__pycache__"))
        source = scratch / "src" / "cqb" / "sim" / "_kernel.c"
        pristine = source.read_text()
        env = {"PYTHONPATH": str(scratch / "src"), "PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1",
               "OPENBLAS_NUM_THREADS": "1"}
        for description, old, new in [("(none: the tests must pass)", "", "")] + MUTANTS:
            if old and pristine.count(old) != 1:
                raise SystemExit(f"mutant {description!r}: its source text occurs {pristine.count(old)} times")
            source.write_text(pristine.replace(old, new) if old else pristine)
            build(scratch)
            result = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *TESTS],
                                    cwd=scratch, env=env, capture_output=True, text=True)
            killed = result.returncode != 0
            if not old:
                if killed:
                    print(result.stdout[-3000:])
                    raise SystemExit("the unmutated kernel fails its tests")
                print("unmutated kernel: tests pass")
                continue
            print(f"{'killed  ' if killed else 'SURVIVED'} {description}")
            if not killed:
                survivors.append(description)
    finally:
        if not args.keep:
            shutil.rmtree(scratch)
    print(f"{len(MUTANTS) - len(survivors)} of {len(MUTANTS)} mutants killed")
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
