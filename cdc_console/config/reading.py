"""Reading a config document's values: every problem noted and the rest still checked, plain
keys read as their option (``core.options``) declares them, sizes and durations in units."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from contextvars import ContextVar
from pathlib import Path
from typing import TypeVar, cast, overload

from cdc_console.core.options import (
    REFUSED,
    SECTIONS,
    Kind,
    Option,
    keys,
    option,
)
from cdc_console.core.untyped import TomlTable
from cdc_console.errors import ConfigError

_T = TypeVar("_T")


_U = TypeVar("_U")


_V = TypeVar("_V")


_D = TypeVar("_D")


#: the keys each section takes ("": the top of the file), from the option table
_KNOWN: dict[str, frozenset[str]] = {name: keys(name) for name in ("", *SECTIONS)}


#: problems found so far while ``config_from_dict`` validates a whole document; None: raise
_PROBLEMS: ContextVar[list[ConfigError] | None] = ContextVar("config_problems", default=None)


def _problem(error: ConfigError) -> None:
    """Note ``error`` and go on when a whole config is being validated, so every problem is
    reported at once; raise it otherwise."""
    found = _PROBLEMS.get()
    if found is None:
        raise error
    found.append(error)


def _or_problem(parse: Callable[[], _T], fallback: _T) -> _T:
    """``parse()``, or ``fallback`` once its ``ConfigError`` is noted (see ``_problem``): the
    rest of the document is still checked, though the config will be refused."""
    try:
        return parse()
    except ConfigError as exc:
        _problem(exc)
        return fallback


def _unknown_key(where: str, key: str) -> ConfigError:
    """The error for a key nobody reads, with the nearest valid one when there is one."""
    if where:
        valid = sorted(_KNOWN[where] - REFUSED.get(where, frozenset()))
        what, listed = f"unknown key {where}.{key}", f"valid in [{where}]: {', '.join(valid)}"
    else:
        valid = [f"[{name}]" for name in sorted(_KNOWN[""] - {"name"})]
        what, listed = f"unknown section or key {key!r}", f"valid sections: {' '.join(valid)}"
        key = f"[{key}]"
    near = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
    return ConfigError(what, f"did you mean {near[0]}? ({listed})" if near else listed)


def _check_keys(doc: TomlTable) -> None:
    """Every unknown key of every section, before anything is parsed."""
    for key in sorted(set(doc) - _KNOWN[""]):
        _problem(_unknown_key("", key))
    for name in sorted(_KNOWN[""]):
        value = doc.get(name, {})
        if name != "name" and isinstance(value, dict):
            for key in sorted(set(value) - _KNOWN[name]):
                _problem(_unknown_key(name, key))


def _section(doc: TomlTable, name: str) -> TomlTable:
    """A section's known keys (unknown ones are reported by ``_check_keys``)."""
    value = doc.get(name, {})
    if not isinstance(value, dict):
        _problem(ConfigError(f"[{name}] must be a table", f"write it as a [{name}] section"))
        return {}
    if _PROBLEMS.get() is None:
        for key in sorted(set(value) - _KNOWN[name]):
            raise _unknown_key(name, key)
    return {k: v for k, v in value.items() if k in _KNOWN[name]}


@overload
def _typed(section: TomlTable, where: str, key: str, kind: type[_T], default: _D) -> _T | _D: ...


@overload
def _typed(
    section: TomlTable, where: str, key: str, kind: tuple[type[_T], type[_U]], default: _D
) -> _T | _U | _D: ...


@overload
def _typed(
    section: TomlTable,
    where: str,
    key: str,
    kind: tuple[type[_T], type[_U], type[_V]],
    default: _D,
) -> _T | _U | _V | _D: ...


def _typed(
    section: TomlTable, where: str, key: str, kind: type | tuple[type, ...], default: object
) -> object:
    """``section[key]`` when it is of ``kind``; otherwise the problem is noted and ``default``
    stands in."""
    return _read_typed(section, where, key, kind, default)


def _read_typed(
    section: TomlTable, where: str, key: str, kind: type | tuple[type, ...], default: object
) -> object:
    if key not in section:
        return default
    value = section[key]
    name = f"{where}.{key}" if where else key
    if isinstance(value, bool) and kind is not bool:
        _problem(
            ConfigError(
                f"{name} must be {_kind_name(kind)}, not a boolean",
                f"set {name} to {_kind_name(kind)}",
            )
        )
        return default
    if not isinstance(value, kind):
        _problem(
            ConfigError(
                f"{name} must be {_kind_name(kind)}, got {type(value).__name__}",
                f"set {name} to {_kind_name(kind)}",
            )
        )
        return default
    return value


_TOML_KINDS: dict[Kind, type | tuple[type, ...]] = {
    Kind.STRING: str,
    Kind.PATH: str,
    Kind.INTEGER: int,
    Kind.PORT: int,
    Kind.NUMBER: (int, float),
    Kind.BOOL: bool,
    Kind.SIZE: (int, str),
    Kind.DURATION: (int, float, str),
    Kind.CHOICE: str,
}


def _get(section: TomlTable, section_name: str, key: str, kind: type[_T]) -> _T:
    """``[section_name] key`` read as its option (``core.options``) declares it: of its kind,
    in its range, one of its choices; sizes in bytes and durations in seconds. Its default
    where the key is absent, and, once the problem is noted, where its value is refused.
    ``kind`` is what the caller holds it as (an option without a default: ``_maybe``)."""
    return cast(_T, _option_value(section, option(section_name, key)))


def _maybe(section: TomlTable, section_name: str, key: str, kind: type[_T]) -> _T | None:
    """``_get`` of an option whose default is None (unset)."""
    return cast("_T | None", _option_value(section, option(section_name, key)))


def _option_value(section: TomlTable, opt: Option) -> object:
    fallback = _plain(opt, opt.default)
    raw = _read_typed(section, opt.section, opt.key, _TOML_KINDS[opt.kind], None)
    if raw is None:
        return fallback
    value = _plain(opt, raw)
    if opt.kind is Kind.CHOICE:
        return _choice(opt, str(value), fallback)
    if opt.kind is Kind.PORT and isinstance(value, int) and not 0 < value < 65536:
        _problem(
            ConfigError(f"{opt.where} {value} is out of range", "use a TCP port from 1 to 65535")
        )
        return fallback
    if isinstance(value, int | float) and not _in_range(opt, value):
        return fallback
    return value


def _plain(opt: Option, value: object) -> object:
    """A TOML value of ``opt`` as the config holds it (None stays None)."""
    if opt.kind is Kind.NUMBER and isinstance(value, int | float):
        return float(value)
    if opt.kind is Kind.SIZE and isinstance(value, int | str):
        return parse_size(value, opt.where)
    if opt.kind is Kind.DURATION and isinstance(value, int | float | str):
        return parse_duration(value, opt.where)
    return value


def _choice(opt: Option, value: str, fallback: object) -> object:
    assert opt.choices is not None
    try:
        return opt.choices(value)
    except ValueError:
        words = ", ".join(opt.choices)
        _problem(
            ConfigError(
                f"{opt.where} {value!r} is not one of {words}",
                f"set {opt.key} = {opt.suggestion()} ({opt.doc})"
                if opt.doc
                else f"set {opt.key} = {opt.suggestion()}",
            )
        )
        return fallback


def _in_range(opt: Option, value: float) -> bool:
    """Whether ``value`` is in ``opt``'s range; the problem noted when it is not."""
    fix = f"set {opt.where} = {opt.suggestion()}"
    shown = f"{value} bytes" if opt.kind is Kind.SIZE else f"{value:g}"
    if opt.above is not None and not value > opt.above:
        _problem(ConfigError(f"{opt.where} must be above {opt.above:g} (got {value:g})", fix))
        return False
    if opt.at_least is not None and value < opt.at_least:
        if opt.at_least == 0:
            _problem(ConfigError(f"{opt.where} {shown} is negative", fix))
        elif opt.kind is Kind.SIZE:
            _problem(ConfigError(f"{opt.where} {shown} is below {_bytes(opt.at_least)}", fix))
        else:
            _problem(ConfigError(f"{opt.where} must be at least {opt.at_least:g}", fix))
        return False
    return True


def _bytes(size: float) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size / scale:g}{unit}"
    return f"{size:g} bytes"


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names = {
        int: "an integer",
        str: "a string",
        float: "a number",
        bool: "true or false",
        list: "a list",
        dict: "a table",
    }
    if isinstance(kind, tuple):
        return " or ".join(names.get(k, k.__name__) for k in kind)
    return names.get(kind, kind.__name__)


def _resolve(base: Path | None, value: str) -> Path:
    path = Path(value).expanduser()
    if not path.is_absolute() and base is not None:
        path = base / path
    return path


_SIZE_UNITS = {"": 1, "b": 1, "kb": 1000, "kib": 1 << 10, "mb": 1000**2, "mib": 1 << 20}


_SIZE_UNITS |= {"gb": 1000**3, "gib": 1 << 30}


_DURATION_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_size(text: str | int, where: str) -> int:
    """Bytes from ``1048576``, ``"1MiB"``, ``"8 MB"``; a ``ConfigError`` naming ``where``
    otherwise (noted, not raised, while a whole document is checked)."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", str(text))
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _SIZE_UNITS:
        _problem(
            ConfigError(
                f"{where} {text!r} is not a size",
                f'write {where.split(".")[-1]} = "256KiB" or bytes',
            )
        )
        return 256 * 1024  # stands in while the rest of the document is checked
    return int(float(match.group(1)) * _SIZE_UNITS[unit])


def parse_duration(text: str | int | float, where: str) -> float:
    """Seconds from ``600``, ``"10m"``, ``"6h"``, ``"1d"``, ``"off"`` (0: never)."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        return float(text)
    if str(text).strip().lower() in ("off", "never"):
        return 0.0
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", str(text))
    if match is None:
        _problem(
            ConfigError(
                f"{where} {text!r} is not a duration",
                f'write {where.split(".")[-1]} = "10m" (s, m, h, d), a number of seconds, or "off"',
            )
        )
        return 0.0  # stands in while the rest of the document is checked
    return float(match.group(1)) * _DURATION_UNITS[match.group(2)]
