"""The JSON schema of a dataclass's fields, from their annotations: the config
schema's policy parameters (:mod:`cqb.pipeline.config_schema`) and its
``summaries`` (:mod:`cqb.analysis.summaries`) are both generated with it."""

from __future__ import annotations

import types
import typing
from dataclasses import MISSING, fields

_JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string", type(None): "null"}


def _field_schema(annotation) -> dict:
    """JSON schema of one annotated field: float → number, int | None → [integer, null], …
    An annotation with no JSON counterpart (a plugin's own type) is left unconstrained."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        parts = [_field_schema(arg) for arg in typing.get_args(annotation)]
        if all(set(part) == {"type"} for part in parts):
            return {"type": sorted({part["type"] for part in parts})}
        return {}
    if typing.get_origin(annotation) is typing.Literal:
        return {"enum": list(typing.get_args(annotation))}
    return {"type": _JSON_TYPES[annotation]} if annotation in _JSON_TYPES else {}


def parameter_fields(params_class) -> dict[str, tuple[dict, object]]:
    """name → (JSON schema, default) of every field of a policy's parameter dataclass."""
    hints = typing.get_type_hints(params_class)
    result = {}
    for item in fields(params_class):
        default = item.default if item.default is not MISSING else (
            item.default_factory() if item.default_factory is not MISSING else None)
        result[item.name] = (_field_schema(hints[item.name]), default)
    return result
