"""The config schema and its validation.

The static schema (workflow/schemas/config.schema.yaml) describes the
structure; the parts that have a source of truth in the package are generated
here, from dataclasses (:func:`parameter_fields`: JSON types from the
annotations, defaults from the fields): the policy parameters from the
registry's parameter dataclasses (plugins included) and ``summaries`` from
:class:`cqb.analysis.summaries.SummarySettings`.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import MISSING, fields

from ..errors import ConfigError, config_error

# instance keys a sweep may vary, in instance-id order (cqb.config.experiments names them)
SWEPT_INSTANCE_KEYS = ("n_servers", "dim", "arrival_rate", "slack", "min_accept_rate")

# The config's group of switches for how jobs run (the run server, the
# scheduler patch), not what they compute: not part of the config hash.
EXECUTION_KEY = "execution"


def config_hash(config: dict) -> str:
    science = {key: value for key, value in config.items() if key != EXECUTION_KEY}
    text = json.dumps(science, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def instance_sweep_keys() -> tuple[str, ...]:
    """Every instance key a sweep may vary: the family keys above, the stream
    kind itself (an i.i.d. control beside its adversaries) and every declared
    stream's own parameters (cqb.sim.streams)."""
    from ..sim.streams import STREAM_KINDS

    own = dict.fromkeys(f.name for kind in STREAM_KINDS.values() for f in fields(kind.params))
    return SWEPT_INSTANCE_KEYS + ("kind",) + tuple(own)


# A policy's round count given as a share of the run's horizon: "T/10" is
# ⌈T/10⌉ at each run's T (the paper's τ on real data, Section 7).
HORIZON_SHARE = re.compile(r"^T/([1-9][0-9]*)$")


def at_horizon(params: Mapping, horizon: int) -> dict:
    """``params`` with each "T/N" value resolved at ``horizon``."""
    return {key: math.ceil(horizon / int(match.group(1)))
            if isinstance(value, str) and (match := HORIZON_SHARE.match(value)) else value
            for key, value in params.items()}


def _or_horizon_share(schema: dict) -> dict:
    """An integer field's schema, which also takes "T/N" (at_horizon)."""
    types_ = schema.get("type")
    if "integer" not in (types_ if isinstance(types_, list) else [types_]):
        return schema
    return {"anyOf": [schema, {"type": "string", "pattern": HORIZON_SHARE.pattern}]}


# ---------------------------------------------------------------- dataclass fields → schema

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


def settings_schema(settings_class) -> dict:
    """The schema of a settings dataclass: its fields, their types and defaults
    (the dataclass is the one source of both)."""
    properties = {key: dict(schema, default=default)
                  for key, (schema, default) in parameter_fields(settings_class).items()}
    return {"type": "object", "additionalProperties": False, "properties": properties}


# ---------------------------------------------------------------- policy parameters → schema


def _registry():
    from ..sim.policies import registered_policies

    return registered_policies()


def accepted_parameters(policy: str) -> set[str]:
    """The parameter names of a registered policy."""
    return {item.name for item in fields(_registry()[policy].params)}


def policy_params_schema() -> dict:
    """The generated part of the config schema (``$defs``): ``policy_params``
    (every parameter of every registered policy, plugins included),
    ``per_policy`` (each policy's own) and ``sweep`` (instance keys, horizon,
    any policy parameter). Types come from the dataclass annotations; values
    are checked by the dataclasses when the runs are built."""
    union: dict[str, dict] = {}
    per_policy = {}
    for name, spec in _registry().items():
        own = {}
        for key, (schema, default) in parameter_fields(spec.params).items():
            own[key] = dict(_or_horizon_share(schema), description=f"default {default!r} ({spec.params.__name__})")
            if key in union and union[key].get("type") != schema.get("type"):
                union[key] = {}  # two policies disagree on the type: leave it to the dataclasses
            else:
                union.setdefault(key, dict(schema))
        per_policy[name] = {"type": "object", "additionalProperties": False, "properties": own}
    array = {"type": "array", "minItems": 1, "uniqueItems": True}
    sweep = {"horizon": dict(array, items={"type": "integer", "minimum": 1})}
    sweep.update({key: dict(array, items={"$ref": f"#/$defs/instance/properties/{key}"})
                  for key in instance_sweep_keys()})
    sweep.update({key: dict(array, items=schema) for key, schema in union.items() if key not in sweep})
    return {
        "policy_params": {"type": "object", "additionalProperties": False,
                          "properties": {key: _or_horizon_share(schema) for key, schema in union.items()}},
        "per_policy": {"type": "object", "additionalProperties": False, "properties": per_policy},
        "sweep": {"type": "object", "minProperties": 1, "maxProperties": 1,
                  "additionalProperties": False, "properties": sweep},
    }


def instance_schema(static_instance: Mapping) -> dict:
    """The instance block: the static one (workflow/schemas/config.schema.yaml:
    the families' keys, with rules for the kinds ``synthetic`` and ``pool``)
    extended by every declared context stream (cqb.sim.streams.STREAM_KINDS):
    ``kind`` is one of their names; a stream gets its family's rules, and its
    own parameters, with their defaults, are allowed with that kind only."""
    from ..sim.streams import STREAM_KINDS

    schema = copy.deepcopy(dict(static_instance))
    schema["properties"]["kind"] = {"enum": list(STREAM_KINDS), "description": "the context stream: " + "; ".join(
        f"{name}: {kind.description}" for name, kind in STREAM_KINDS.items())}
    own = {name: {key: dict({"enum": list(kind.choices[key])} if key in kind.choices else field_schema,
                            default=default)
                  for key, (field_schema, default) in parameter_fields(kind.params).items()}
           for name, kind in STREAM_KINDS.items()}
    for name, kind in STREAM_KINDS.items():
        for key, field_schema in own[name].items():
            schema["properties"].setdefault(key, {k: v for k, v in field_schema.items() if k != "default"})
        if name != kind.family:
            for rule in static_instance["allOf"]:
                if rule["if"]["properties"]["kind"]["const"] == kind.family:
                    schema["allOf"].append({"if": {"properties": {"kind": {"const": name}}},
                                            "then": copy.deepcopy(rule["then"])})
        then = {"properties": own[name]} if own[name] else {}
        foreign = sorted({key for other in own if other != name for key in own[other]} - set(own[name]))
        if foreign:
            then["not"] = {"anyOf": [{"required": [key]} for key in foreign]}
        if then:
            schema["allOf"].append({"if": {"properties": {"kind": {"const": name}}}, "then": then})
    return schema


def config_schema(static_schema: Mapping) -> dict:
    """The static schema (workflow/schemas/config.schema.yaml) with its
    generated ``$defs`` filled in."""
    from ..analysis.summaries import SummarySettings

    schema = copy.deepcopy(dict(static_schema))
    schema["$defs"].update(policy_params_schema())
    schema["$defs"]["instance"] = instance_schema(schema["$defs"]["instance"])
    schema["$defs"]["summaries"] = settings_schema(SummarySettings)
    return schema


def validate_config(config: dict, static_schema: Mapping) -> None:
    """Check ``config`` against the schema (its generated parts filled in) and
    fill in the schema's defaults (in place). Raises ConfigError naming the
    first bad key and value."""
    check_experiment_names(config.get("experiments"), static_schema)
    validate_with_defaults(config, config_schema(static_schema))


def check_experiment_names(experiments, static_schema: Mapping) -> None:
    """`--config experiments='{NAME: {...}}'` changes the experiment NAME of the
    config file: a NAME the file does not have, given without the keys a new
    experiment needs, is a misspelt one (one line listing the known names)."""
    if not isinstance(experiments, Mapping):
        return
    required = static_schema["$defs"]["experiment"]["required"]
    known = sorted(name for name, entry in experiments.items()
                   if isinstance(entry, Mapping) and set(required) <= set(entry))
    for name, entry in experiments.items():
        if known and isinstance(entry, Mapping) and "instance" not in entry:
            raise ConfigError(f"unknown experiment {name}: known: {', '.join(known)} "
                              f"(a new experiment needs {', '.join(required)})")


def validate_with_defaults(config: dict, schema: Mapping) -> None:
    """Check ``config`` against ``schema`` and fill in its defaults (in place),
    at every depth; ConfigError names the first bad key and value. (The real-data
    settings, workflow/schemas/datasets.schema.yaml, go through here as they are.)"""
    import jsonschema
    from jsonschema import validators

    base = jsonschema.Draft202012Validator
    check_properties = base.VALIDATORS["properties"]

    def properties_with_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for key, subschema in properties.items():
                if isinstance(subschema, dict) and "default" in subschema:
                    instance.setdefault(key, copy.deepcopy(subschema["default"]))
        yield from check_properties(validator, properties, instance, schema)

    filling = validators.extend(base, {"properties": properties_with_defaults})(schema)
    error = jsonschema.exceptions.best_match(filling.iter_errors(config))
    if error is None:
        error = jsonschema.exceptions.best_match(base(schema).iter_errors(config))
    if error is None:
        return
    key = ".".join(str(part) for part in error.absolute_path) or "(top level)"
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = set(error.schema.get("properties", {}))
        unknown = sorted(set(error.instance) - allowed)
        where = f"{key}." if error.absolute_path else ""
        raise ConfigError(f"unknown config key {where}{unknown[0]}: allowed here: "
                          f"{', '.join(sorted(allowed))}")
    config_error(key, error.instance, error.message)


# ---------------------------------------------------------------- config loading helpers


def yaml_scalars(value):
    """Nested values given with --config arrive as text ('0.1', 'null'): read
    such text as the YAML number, boolean or null it spells."""
    import yaml

    if isinstance(value, Mapping):
        return {key: yaml_scalars(item) for key, item in value.items()}
    if isinstance(value, list):
        return [yaml_scalars(item) for item in value]
    if isinstance(value, str):
        try:
            parsed = yaml.safe_load(value)
        except yaml.YAMLError:
            return value
        if parsed is None or isinstance(parsed, (bool, int, float)):
            return parsed
    return value
