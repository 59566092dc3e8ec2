"""Strict validation of YAML configs with pydantic v2.

The public config objects (:class:`~aryl_gym.config.ScenarioConfig` and its sections,
:class:`~aryl_gym.train.config.TrainConfig`, ...) stay frozen dataclasses: they are the one
place where fields, types and defaults are written. :func:`validate` derives a pydantic model
from a dataclass (strict mode, unknown keys forbidden, no NaN or infinity), validates a mapping
read from YAML against it and builds the dataclass from the result.

Constraints go into the dataclass annotations with :mod:`annotated_types`
(``Annotated[int, Ge(1)]``), so importing a config module does not import pydantic; the model
is built on first use and cached.

Strict mode means no coercion: ``"3"`` is not an integer, ``1.5`` is not an integer, ``true``
is not a number. Three exceptions are explicit: an integer is accepted where a float is expected
(YAML writes ``load: 1``), a whole float where an integer is expected (YAML reads
``num_jobs: 1e5`` as a float), and a list where a tuple is expected (YAML has no tuples).

A :class:`pydantic.ValidationError` becomes a :class:`~aryl_gym.config.ConfigError` whose
message names the file, the key path (``workload.num_jobs``), what was expected and what was
found, one line per error.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Mapping
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

from aryl_gym.errors import ConfigError

T = TypeVar("T")

#: errors shown per message (the rest are counted)
MAX_ERRORS = 8


def _error_class() -> type[ValueError]:
    return ConfigError


# --------------------------------------------------------------------------------------------
# dataclass -> pydantic model
# --------------------------------------------------------------------------------------------


@functools.cache
def model_for(cls: type, exclude: tuple[str, ...] = ()) -> Any:
    """The strict pydantic model of dataclass ``cls`` (fields in ``exclude`` left out)."""
    # pydantic (about 0.3 s to import): only when a config is validated
    from pydantic import ConfigDict, Field, create_model

    hints = typing.get_type_hints(cls, include_extras=True)
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if not f.init or f.name in exclude:
            continue
        ann = _convert(hints[f.name])
        if f.default is not dataclasses.MISSING:
            default: Any = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = Field(default_factory=f.default_factory)
        else:
            default = ...
        fields[f.name] = (ann, default)
    model = create_model(  # type: ignore[call-overload]
        f"{cls.__name__}Schema",
        __config__=ConfigDict(strict=True, extra="forbid", allow_inf_nan=False, frozen=True),
        __doc__=cls.__doc__,
        **fields,
    )
    _MODEL_TO_DATACLASS[model] = cls
    return model


_MODEL_TO_DATACLASS: dict[Any, type] = {}


def _convert(ann: Any) -> Any:
    """A dataclass annotation made ready for the strict model (nested dataclasses -> models)."""
    # pydantic (about 0.3 s to import): only when a config is validated
    from pydantic import BeforeValidator, Field

    if ann is int:
        # YAML reads 1e5 as a float: a whole one is the integer (1.5 stays an error)
        return Annotated[int, BeforeValidator(_whole_float)]
    origin = get_origin(ann)
    if origin is Annotated:
        base, *meta = get_args(ann)
        params = (_convert(base), *meta)
        return Annotated[params]  # type: ignore[valid-type]
    if dataclasses.is_dataclass(ann) and isinstance(ann, type):
        return model_for(ann)
    if origin in (Union, types.UnionType):
        return Union[tuple(_convert(a) for a in get_args(ann))]  # noqa: UP007
    if origin is tuple:
        args = tuple(_convert(a) for a in get_args(ann))
        # YAML has lists, not tuples: accept a list (the items stay strict)
        return Annotated[tuple[args], Field(strict=False)]  # type: ignore[valid-type]
    if origin in (Mapping, dict, typing.Mapping):
        k, v = get_args(ann) or (Any, Any)
        return dict[_convert(k), _convert(v)]  # type: ignore[misc]
    if origin is list:
        (a,) = get_args(ann) or (Any,)
        return list[_convert(a)]  # type: ignore[misc]
    return ann


def _whole_float(value: Any) -> Any:
    """``1e5`` / ``30.0`` -> ``100000`` / ``30`` (the command line's integer flags read them
    alike, :func:`aryl_gym.fileio.parse_number`); anything else as is, for the strict check."""
    if type(value) is float and value.is_integer() and abs(value) <= 2**53:
        return int(value)
    return value


def _to_dataclass(value: Any) -> Any:
    """Validated model instances (at any depth) -> their dataclasses."""
    cls = _MODEL_TO_DATACLASS.get(type(value))
    if cls is not None:
        return cls(**{k: _to_dataclass(getattr(value, k)) for k in type(value).model_fields})
    if isinstance(value, dict):
        return {k: _to_dataclass(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_to_dataclass(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_to_dataclass(v) for v in value)
    return value


def validate(
    cls: type[T],
    data: Any,
    source: str,
    prefix: tuple[str | int, ...] = (),
    exclude: tuple[str, ...] = (),
    fill: Mapping[str, Any] | None = None,
) -> T:
    """``data`` checked against dataclass ``cls`` -> a ``cls`` instance, or a ConfigError.

    ``prefix`` is prepended to key paths in messages (``("default",)`` for a section of an
    algorithm file); ``exclude`` leaves fields out of the check (they are not allowed in
    ``data``); ``fill`` gives their values (trusted, not checked).
    """
    model = model_for(typing.cast(type, cls), exclude)
    obj = validate_model(model, data, source, prefix)
    values = {k: _to_dataclass(getattr(obj, k)) for k in type(obj).model_fields}
    return cls(**values, **(fill or {}))


def validate_model(model: Any, data: Any, source: str, prefix: tuple[str | int, ...] = ()) -> Any:
    """``model.model_validate(data)`` with errors turned into one readable ConfigError."""
    # pydantic (about 0.3 s to import): only when a config is validated
    from pydantic import ValidationError

    if not isinstance(data, Mapping):
        where = _path(prefix) or "the top level"
        raise _error_class()(
            f"{source}: {where} must be a mapping (key: value lines), got {_found(data)}"
        )
    try:
        return model.model_validate(dict(data))
    except ValidationError as exc:
        raise _error_class()(format_errors(exc, source, model, prefix)) from None


# --------------------------------------------------------------------------------------------
# messages
# --------------------------------------------------------------------------------------------


def _path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _found(value: Any) -> str:
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return f"a list {list(value)!r}" if len(value) <= 8 else f"a list of {len(value)} items"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


_EXPECT = {
    "int_type": "must be an integer",
    "int_from_float": "must be an integer",
    "int_parsing": "must be an integer",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "finite_number": "must be a finite number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "string_type": "must be a string",
    "dict_type": "must be a mapping (key: value lines)",
    "mapping_type": "must be a mapping (key: value lines)",
    "model_type": "must be a mapping (key: value lines)",
    "model_attributes_type": "must be a mapping (key: value lines)",
    "list_type": "must be a list",
    "tuple_type": "must be a list",
}


def _num(x: Any) -> Any:
    return int(x) if isinstance(x, float) and x.is_integer() else x


def _bound(kind: str, ctx: Mapping[str, Any], meta: list[Any]) -> str:
    """``must be >= 1``; a field bounded on both sides: ``must be in [0, 1]``."""
    lo = [m for m in meta if type(m).__name__ in ("Ge", "Gt")]
    hi = [m for m in meta if type(m).__name__ in ("Le", "Lt")]
    if lo and hi:
        a, b = lo[0], hi[0]
        left = "[" if type(a).__name__ == "Ge" else "("
        right = "]" if type(b).__name__ == "Le" else ")"
        lo_v = getattr(a, "ge", getattr(a, "gt", None))
        hi_v = getattr(b, "le", getattr(b, "lt", None))
        return f"must be in {left}{_num(lo_v)}, {_num(hi_v)}{right}"
    op = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<",
          "less_than_equal": "<="}[kind]
    return f"must be {op} {_num(next(iter(ctx.values())))}"


def _field_meta(model: Any, loc: tuple[Any, ...]) -> list[Any]:
    """The constraint metadata of the field at ``loc`` (empty when not a model field)."""
    if not loc:
        return []
    cur: Any = model
    for part in loc[:-1]:
        cur = _step(cur, part)
        if cur is None:
            return []
    cur = _strip(cur)
    fields = getattr(cur, "model_fields", {})
    if loc[-1] in fields:
        info = fields[loc[-1]]
        meta = list(info.metadata)
        ann = info.annotation
        # ``X | None``: the constraints sit on X
        for a in get_args(ann) if get_origin(ann) in (Union, types.UnionType) else ():
            if get_origin(a) is Annotated:
                meta += list(get_args(a)[1:])
        return meta
    return []


def _step(cur: Any, part: Any) -> Any:
    cur = _strip(cur)
    if hasattr(cur, "model_fields") and isinstance(part, str) and part in cur.model_fields:
        return cur.model_fields[part].annotation
    if get_origin(cur) in (list, tuple) and isinstance(part, int):
        return (get_args(cur) or (Any,))[0]
    if get_origin(cur) is dict:
        return (get_args(cur) or (Any, Any))[1]
    return None


def _allowed_keys(model: Any, loc: tuple[Any, ...]) -> list[str]:
    """The keys the model accepts at path ``loc`` (for an unknown-key message)."""
    cur: Any = model
    for part in loc:
        cur = _step(cur, part)
        if cur is None:
            return []
    cur = _strip(cur)
    return sorted(cur.model_fields) if hasattr(cur, "model_fields") else []


def _strip(ann: Any) -> Any:
    """``Annotated[X, ...]`` and ``X | None`` -> ``X`` (the first model in a union)."""
    while True:
        origin = get_origin(ann)
        if origin is Annotated:
            ann = get_args(ann)[0]
        elif origin in (Union, types.UnionType):
            args = [a for a in get_args(ann) if a is not type(None)]
            models = [a for a in args if hasattr(_strip(a), "model_fields")]
            ann = (models or args or [Any])[0]
        else:
            return ann


def _one(err: Mapping[str, Any], model: Any, prefix: tuple[Any, ...]) -> str:
    loc = tuple(err["loc"])
    kind = err["type"]
    full = prefix + loc
    if kind == "extra_forbidden":
        key, parent = loc[-1], loc[:-1]
        where = f"in {_path(prefix + parent)}" if prefix + parent else "at the top level"
        allowed = _allowed_keys(model, parent)
        tail = f". Allowed keys: {', '.join(allowed)}" if allowed else ""
        return f"unknown key {str(key)!r} {where}{tail}"
    if kind == "missing":
        key, parent = loc[-1], loc[:-1]
        where = f" in {_path(prefix + parent)}" if prefix + parent else ""
        return f"missing key {str(key)!r}{where}"
    path = _path(full) or "the top level"
    got = f", got {_found(err.get('input'))}"
    ctx = err.get("ctx") or {}
    value = err.get("input")
    if kind == "float_type" and type(value) is int:
        # was: "must be a number, got 1000000..." of a number (too large for a float)
        return f"{path} is too large to be a number (an integer of {len(str(abs(value)))} digits; at most about 1.8e308)"
    if kind in _EXPECT:
        return f"{path} {_EXPECT[kind]}{got}"
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        return f"{path} {_bound(kind, ctx, _field_meta(model, loc))}{got}"
    if kind == "literal_error":
        return f"{path} must be one of {ctx.get('expected')}{got}"
    if kind == "value_error":
        return f"{path} {ctx.get('error', err['msg'])}{got}"
    if kind in ("too_short", "string_too_short"):
        n = ctx.get("min_length", 1)
        need = "must not be empty" if n == 1 else f"must have at least {n} items"
        return f"{path} {need}{got}"
    if kind in ("too_long", "string_too_long"):
        return f"{path} must have at most {ctx.get('max_length')} items{got}"
    return f"{path}: {err['msg']}{got}"


def format_errors(exc: Any, source: str, model: Any, prefix: tuple[Any, ...] = ()) -> str:
    """A ValidationError as ``SOURCE: message`` lines (at most MAX_ERRORS)."""
    errors = exc.errors(include_url=False)
    lines = []
    for err in errors[:MAX_ERRORS]:
        line = _one(err, model, prefix)
        if line not in lines:
            lines.append(line)
    if len(errors) > MAX_ERRORS:
        lines.append(f"... and {len(errors) - MAX_ERRORS} more errors")
    if len(lines) == 1:
        return f"{source}: {lines[0]}"
    return f"{source}: {len(lines)} errors:\n  " + "\n  ".join(lines)
