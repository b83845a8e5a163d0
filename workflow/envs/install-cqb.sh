#!/usr/bin/env sh
# Installs the cqb package into a per-rule conda env. Snakemake runs
# <env>.post-deploy.sh inside each env it creates (--sdm conda); every
# <env>.post-deploy.sh here is a symlink to this script.
#
# Why not a pip entry such as `- -e ../..` in the env file: Snakemake copies
# the env file to .snakemake/conda/<hash>.yaml (or under --conda-prefix) and
# conda resolves relative pip paths against that copy's folder, not against
# workflow/envs/. This script runs in Snakemake's working directory instead,
# which is the repository root (every path of the workflow is relative to it).
#
# Editable: the env hash covers only the env file and this script, so a plain
# install would keep running old package code after an edit. No dependencies:
# the env file lists them (checked by tests/test_environment.py), so conda,
# not pip, provides them.
set -eu
if ! grep -qs '^name = "cqb"$' pyproject.toml; then
    echo "cqb post-deploy: run snakemake from the repository root ($(pwd) holds no cqb pyproject.toml)" >&2
    exit 1
fi
python -m pip install --quiet --no-deps --no-build-isolation --editable "$(pwd)"
