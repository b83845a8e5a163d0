"""Hand-written mutants of the compiled simulation core, each tried against the tests.

mutmut cannot mutate code that runs compiled, so src/cqb/sim/_core.py gets
these: plausible slips, each applied to a scratch copy of the checkout
(never this one: a running pipeline would pick the mutant up), compiled
there by its own setup.py, and the core's tests run on it. A mutant that no
test kills is reported; it means a test is missing. Each build takes about
a minute: ``--only`` picks mutants by a word of their description.

    python -m bench.core_mutants [--only WORD] [--tests FILE ...] [--keep]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .trees import CHECKOUT

CORE = Path("src/cqb/sim/_core.py")
TESTS = ["tests/test_sim_estimation.py", "tests/test_sim_optimistic.py", "tests/test_sim_policies.py",
         "tests/test_sim_simulate.py"]

# (what the slip is, the exact source text, its replacement)
MUTANTS = [
    ("argmax: ties to the latest pair", "            if value > best:\n", "            if value >= best:\n"),
    ("argmax: NaN not preferred",
     "            if isnan(value):\n                chooser.position, chooser.server = i, k\n                return\n", ""),
    ("refresh: newcomers treated as scored",
     "elif fresh <= length and queue[length - fresh] == self.scored_until:", "elif fresh <= length:"),
    ("refresh: stale columns never refreshed", "            if self._stale[k]:\n", "            if False:\n"),
    ("learn: column not marked stale", "        self._stale[server] = 1\n", "        pass\n"),
    ("score: downdate adds (uᵀx)²", "self._quads[cell] - inner * inner", "self._quads[cell] + inner * inner"),
    ("score: bonus without β", "(self.bonus_scale * est._widths[k]) * sqrt(quad)", "self.bonus_scale * sqrt(quad)"),
    ("schedule: one refit too many", "n + 1 if n < self.refit_min_samples", "n + 1 if n <= self.refit_min_samples"),
    ("schedule: growth ignored", "n + max(growth, 1)", "n + 1"),
    ("width: d instead of 2d", "(2.0 * self.dim) * log1p", "(1.0 * self.dim) * log1p"),
    ("width: S term dropped", "(sqrt(inner) + bound * sqrt(self.reg))", "(sqrt(inner))"),
    ("Newton: step added", "self._mle[to + a] -= self._grad[a]", "self._mle[to + a] += self._grad[a]"),
    ("Newton: gradient without the ridge", "grad[a] = reg * theta[to + a]", "grad[a] = 0.0"),
    ("online step: sign of the residual", "-= (prob - outcome) * self._hx[a]", "-= (outcome - prob) * self._hx[a]"),
    ("Sherman–Morrison: H⁻¹ weight ignored", "sqrt(1.0 / weight + quad_or_dot", "sqrt(1.0 + quad_or_dot"),
    ("Sherman–Morrison: V⁻¹ not updated", "        subtract_outer(self._inv, vo, self._u, d)\n", "\n"),
    ("inverse: diagonal term of the product skipped", "for m in range(j, i):", "for m in range(j + 1, i):"),
    ("Gram matrix: diagonal ridge dropped", "        h[a * d + a] += diag\n", "        h[a * d + a] += 0.0\n"),
    ("non-zeros: negative entries dropped", "if x[xo + a] != 0.0:", "if x[xo + a] > 0.0:"),
    ("dot: last elements skipped", "    while j < n:\n", "    while j + 1 < n:\n"),
    ("ball: projection only far outside", "        if norm > bound:\n            self.project(",
     "        if norm > 2.0 * bound:\n            self.project("),
]


def build(root: Path) -> None:
    """Compile the scratch copy's core in place by its setup.py (its flags and
    its build record, as `pip install` builds it). --force: a skipped rebuild
    would leave the last binary, which cqb then refuses (its build record no
    longer matches the source), and a mutant would pass as killed."""
    done = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace", "--force"], cwd=root,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"build failed:\n{done.stderr[-3000:]}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", metavar="WORD", help="only the mutants whose description contains WORD")
    parser.add_argument("--tests", nargs="+", default=TESTS, help="the test files to run (paths in the checkout)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTANTS if args.only is None or args.only.lower() in m[0].lower()]
    pristine = (CHECKOUT / CORE).read_text()
    for description, old, _ in MUTANTS:  # every mutant still applies: the core may have moved on
        if pristine.count(old) != 1:
            raise SystemExit(f"mutant {description!r}: its source text occurs {pristine.count(old)} times in {CORE}")
    scratch = Path(tempfile.mkdtemp(prefix="cqb_core_mutants_"))
    survivors = []
    try:
        ignore = shutil.ignore_patterns("*.so", "__pycache__", "job-client", "_core.sha256")
        shutil.copytree(CHECKOUT / "src", scratch / "src", ignore=ignore)
        shutil.copytree(CHECKOUT / "tests", scratch / "tests", ignore=ignore)
        for name in ("setup.py", "pyproject.toml", "README.md"):  # what the build and the tests read
            shutil.copy2(CHECKOUT / name, scratch / name)
        source = scratch / CORE
        env = {"PYTHONPATH": str(scratch / "src"), "PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1",
               "OPENBLAS_NUM_THREADS": "1"}
        for description, old, new in [("(none: the tests must pass)", "", "")] + chosen:
            source.write_text(pristine.replace(old, new) if old else pristine)
            build(scratch)
            result = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                                     *args.tests], cwd=scratch, env=env, capture_output=True, text=True)
            killed = result.returncode != 0
            if not old:
                if killed:
                    print(result.stdout[-3000:])
                    raise SystemExit("the unmutated core fails its tests")
                print("unmutated core: tests pass", flush=True)
                continue
            print(f"{'killed  ' if killed else 'SURVIVED'} {description}", flush=True)
            if not killed:
                survivors.append(description)
    finally:
        if not args.keep:
            shutil.rmtree(scratch)
    print(f"{len(chosen) - len(survivors)} of {len(chosen)} mutants killed")
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
