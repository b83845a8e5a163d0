"""A hash of the simulation code, so the pipeline reruns simulations when it changes.

The hash covers every source file of this subpackage (``cqb.sim``) and nothing
else: the subpackage holds exactly what ``cqb run`` executes to produce a run
file and imports nothing from the rest of ``cqb`` (tests/test_layers.py), so
adding a module here needs no list to be kept, and editing the analysis,
plotting, data or pipeline code reruns no simulation. Presentation (names,
styles, listing order) lives outside it, in :mod:`cqb.presentation`.

It hashes what runs, not how it reads: a Python source counts by its syntax
tree without docstrings (comments, blank lines and layout are not in the tree),
a Cython ``.pxd`` declaration by its tokens without comments and blank lines.
So rewording a docstring or a comment reruns nothing, while any change to a
statement, a name, a literal, a decorator or a type annotation (Cython's
pure-Python mode types the kernels through annotations) changes the hash.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import io
import tokenize
from pathlib import Path

SIMULATION_ROOT = Path(__file__).parent
# Sources only (the kernels' .pxd declarations are source): build products (the
# compiled kernels' .so, __pycache__) differ between machines that run the same code.
SOURCE_SUFFIXES = (".py", ".pxd")
# Bumped when the rule below changes, so hashes of two rules never collide.
HASH_RULE = b"cqb code hash: syntax without docstrings, version 1"


def source_files(root: Path) -> list[Path]:
    """The hashed files under ``root``, by relative path."""
    return sorted((path for path in Path(root).rglob("*")
                   if path.suffix in SOURCE_SUFFIXES and path.is_file() and "__pycache__" not in path.parts),
                  key=lambda path: path.relative_to(root).as_posix())


def _without_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return tree


def _python_text(source: bytes) -> bytes:
    """A Python source as its syntax tree without docstrings (no positions)."""
    tree = _without_docstrings(ast.parse(source))
    return ast.dump(tree, annotate_fields=True, include_attributes=False).encode()


# Tokens that carry no code: comments, line breaks inside a statement, the
# stream's encoding marker and its end.
_LAYOUT_TOKENS = {tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER}


def _declaration_text(source: bytes) -> bytes:
    """A Cython declaration file as its tokens, comments and blank lines dropped;
    indentation stays (INDENT/DEDENT tokens), so a moved block still counts."""
    tokens = tokenize.tokenize(io.BytesIO(source).readline)
    kept = [f"{tokenize.tok_name[token.type]}:{token.string}"
            for token in tokens if token.type not in _LAYOUT_TOKENS]
    return "\n".join(kept).encode()


def hashed_text(path: Path) -> bytes:
    """What the hash reads of one source file (see the module docstring)."""
    source = Path(path).read_bytes()
    return _python_text(source) if Path(path).suffix == ".py" else _declaration_text(source)


def code_hash(root: Path) -> str:
    """sha256 over the relative path and the hashed text of every source file under ``root``."""
    digest = hashlib.sha256(HASH_RULE)
    for path in source_files(root):
        content = hashed_text(path)
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(b"\0%d\0" % len(content))  # lengths keep path/content boundaries unambiguous
        digest.update(content)
    return digest.hexdigest()[:16]


@functools.lru_cache(maxsize=1)
def simulation_code_hash() -> str:
    """The code hash of this installed subpackage (what run files record)."""
    return code_hash(SIMULATION_ROOT)
