"""Analysis of run files: ``summaries`` (per-run statistics), ``aggregate``
(per-experiment tables), ``claims`` (verdicts with intervals), ``tuning``,
``rates`` (Figure 5's slopes), ``sensitivity`` (Figure 7's cells), ``compare``
(two trees of run files) and ``beyond_tables`` (the Figure 5 and 6 tables).

Imports from :mod:`cqb.sim` (the run-file format, the policies' names) only.
"""
