"""Rendering template values: the sandboxed Jinja2 environment, its resource limits, and compiled templates.

Templates are untrusted text from the repo: every string value is rendered with a sandboxed
Jinja2 environment and ``StrictUndefined``; keys are never rendered. A value that is exactly one
``{{ expression }}`` keeps the expression's type (``{{ TASKS|length }}`` is an integer), anything
else renders to a string. A render is bounded: sequences repeated past ``_MAX_SEQUENCE`` items,
exponents past 64, ``range()`` past 10,000 items, rendered values past ``_MAX_RENDERED`` characters
and, in the main thread, more than ``_RENDER_SECONDS`` of CPU time are refused with a
:class:`TemplateFailure`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

from toporender.load.yaml_source import Loc

_WHOLE = re.compile(r"^\s*\{\{(?P<expr>(?:(?!\}\}|\{\{|\{%).)*)\}\}\s*$", re.S)
_MAX_RENDERED = 1_000_000


class TemplateFailure(Exception):
    """A template could not be rendered; carries the data path of the failing value."""

    def __init__(self, path: Loc, message: str):
        super().__init__(message)
        self.path = path
        self.message = message


_MAX_SEQUENCE = 100_000
_RENDER_SECONDS = 0.5
_MAX_WIDTH = 10_000
# A printf-style conversion's width and precision (``*`` takes them from the arguments).
_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?")
_STR_WIDTH_METHODS = frozenset({"center", "ljust", "rjust", "zfill", "expandtabs"})


def _refuse(message: str) -> Any:
    from jinja2.exceptions import SecurityError

    return SecurityError(message)


def _check_percent(fmt: Any) -> None:
    """Refuse a printf-style format whose width or precision would build a huge string in one C call."""
    if not isinstance(fmt, str):
        return
    for match in _PERCENT_SPEC.finditer(fmt):
        for size in match.groups():
            if size == "*" or (size is not None and int(size) > _MAX_WIDTH):
                raise _refuse(f"a format width or precision over {_MAX_WIDTH} refused")


def _check_brace(fmt: Any) -> None:
    """The same for ``str.format`` fields (``{:>999999999}``), including widths taken from arguments."""
    if not isinstance(fmt, str):
        return
    import string

    try:
        fields = list(string.Formatter().parse(fmt))
    except ValueError:
        return  # str.format itself refuses it with its own message
    for _, _, spec, _ in fields:
        if spec and ("{" in spec or any(int(n) > _MAX_WIDTH for n in re.findall(r"\d+", spec))):
            raise _refuse(f"a format width or precision over {_MAX_WIDTH}, or one taken from an argument, refused")


def _check_width(*args: Any) -> None:
    if any(isinstance(a, int) and not isinstance(a, bool) and a > _MAX_WIDTH for a in args):
        raise _refuse(f"a width over {_MAX_WIDTH} refused")


@lru_cache(maxsize=1)
def _env() -> Any:
    """The sandboxed environment, imported on first use: most renders have no templates.

    Besides Jinja's sandbox (no private attributes, bounded ``range``), the immutable one: a template cannot
    change ``TASKS`` or any other value that later templates and pods see. ``*``, ``**`` and ``%``, the
    formatting methods and filters that size their output from an argument are bounded, so
    ``{{ 'x' * 10**9 }}`` or ``{{ '%0999999999d' % 1 }}`` cannot exhaust memory in one C call.
    """
    from jinja2 import StrictUndefined
    from jinja2.exceptions import SecurityError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class BoundedSandbox(ImmutableSandboxedEnvironment):
        intercepted_binops = frozenset({"*", "**", "%"})

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            if operator == "**" and isinstance(right, (int, float)) and abs(right) > 64:
                raise SecurityError("exponent larger than 64 refused")
            if operator == "%":
                _check_percent(left)
            if operator == "*":
                for seq, n in ((left, right), (right, left)):
                    if isinstance(seq, (str, list, tuple)) and isinstance(n, int) and len(seq) * n > _MAX_SEQUENCE:
                        raise SecurityError(f"repeating a sequence past {_MAX_SEQUENCE} items refused")
            return super().call_binop(context, operator, left, right)

        def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
            owner = getattr(__obj, "__self__", None)
            if isinstance(owner, str):
                name = getattr(__obj, "__name__", "")
                if name in _STR_WIDTH_METHODS:
                    _check_width(*args, *kwargs.values())
                elif name == "replace" and len(args) >= 2 and isinstance(args[0], str) and isinstance(args[1], str):
                    count = owner.count(args[0]) if args[0] else len(owner) + 1
                    if len(owner) + count * (len(args[1]) - len(args[0])) > _MAX_RENDERED:
                        raise SecurityError(f"a replace() result over {_MAX_RENDERED} characters refused")
            return super().call(__context, __obj, *args, **kwargs)

        def wrap_str_format(self, value: Any) -> Any:
            owner = getattr(value, "__self__", None)
            if getattr(value, "__name__", "") in ("format", "format_map"):
                _check_brace(owner)
            return super().wrap_str_format(value)

    env = BoundedSandbox(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)
    format_filter = env.filters["format"]

    def bounded_format(value: Any, *args: Any, **kwargs: Any) -> Any:
        _check_percent(value)
        return format_filter(value, *args, **kwargs)

    env.filters["format"] = bounded_format
    for name in ("center", "indent", "wordwrap"):
        env.filters[name] = _bounded_filter(env.filters[name])
    env.globals.clear()
    env.globals["range"] = lambda *args: _bounded_range(*args)
    return env


def _bounded_filter(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A filter whose numeric arguments (widths) are bounded before it runs."""

    def bounded(value: Any, *args: Any, **kwargs: Any) -> Any:
        _check_width(*args, *kwargs.values())
        return fn(value, *args, **kwargs)

    return bounded


def _bounded_range(*args: int) -> range:
    from jinja2.exceptions import SecurityError

    rng = range(*args)
    if len(rng) > 10_000:
        raise SecurityError("range() longer than 10000 refused")
    return rng


class _Deadline:
    """Stop a runaway template (nested loops) after ``_RENDER_SECONDS`` of CPU time when we run in the
    main thread. CPU time, not wall time: a busy machine (a loaded repo server) must not turn a
    healthy template into an error."""

    def __enter__(self) -> None:
        import signal
        import threading

        self.armed = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
        if self.armed:
            def timeout(signum: int, frame: Any) -> None:
                raise TimeoutError(f"template rendering took longer than {_RENDER_SECONDS} s of CPU time")

            self.previous = signal.signal(signal.SIGVTALRM, timeout)
            signal.setitimer(signal.ITIMER_VIRTUAL, _RENDER_SECONDS)

    def __exit__(self, *exc: object) -> None:
        if self.armed:
            import signal

            signal.setitimer(signal.ITIMER_VIRTUAL, 0)
            signal.signal(signal.SIGVTALRM, self.previous)


@lru_cache(maxsize=8192)
def _compile(text: str) -> Callable[[Mapping[str, Any]], Any]:
    from jinja2 import Undefined

    env = _env()
    whole = _WHOLE.match(text)
    if whole:
        expr = env.compile_expression(whole.group("expr"), undefined_to_none=False)

        def native(variables: Mapping[str, Any]) -> Any:
            value = expr(**variables)
            if isinstance(value, Undefined):
                str(value)  # raises UndefinedError with Jinja's message
            return value

        return native
    template = env.from_string(text)
    return lambda variables: template.render(**variables)


def _jsonable(value: Any, path: Loc) -> Any:
    """``value`` as plain JSON data. A ``str`` subclass (Jinja's ``Markup`` from ``tojson``, ``safe`` or
    ``escape``) becomes a plain ``str``: emitters dispatch on exact types, and YAML would write a subclass as
    something else."""
    if value is None or type(value) in (bool, int, float, str):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, (list, tuple)):
        return [_jsonable(v, path) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v, path) for k, v in value.items()}
    raise TemplateFailure(path, f"expression produced a {type(value).__name__}, which is not a YAML value")


_SIMPLE_REF = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
# ``{{ TASKS|length }}``, the usual ``numNodes`` of a ComputeDomain: Jinja's ``length`` is ``len``.
LENGTH_REF = re.compile(r"\s*\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\|\s*length\s*\}\}\s*")
_SIZED = (list, tuple, str, dict)


@lru_cache(maxsize=8192)
def simple_parts(text: str) -> tuple[str, ...] | None:
    """Split ``text`` into literal/name parts when it uses nothing but ``{{ NAME }}`` references.

    Most template values are like ``compute-domain-{{WF_GROUP_UUID}}``; substituting them directly
    gives exactly what Jinja would (``str()`` of the value) without a Jinja context per pod.
    """
    parts = _SIMPLE_REF.split(text)
    if any("{{" in lit or "{%" in lit or "{#" in lit for lit in parts[::2]):
        return None
    return tuple(parts)


def format_string(parts: tuple[str, ...]) -> str:
    """The ``str.format_map`` string of :func:`simple_parts` parts: literals escaped, names as fields."""
    return "".join(p.replace("{", "{{").replace("}", "}}") if i % 2 == 0 else "{" + p + "}"
                   for i, p in enumerate(parts))


def render_value(value: Any, variables: Mapping[str, Any], path: Loc = ()) -> Any:
    """Render every string inside ``value`` (not keys) with ``variables``; the result shares nothing with
    ``value``."""
    return _compile_tree(value, path)(variables)


def _jinja_string(value: str, variables: Mapping[str, Any], path: Loc) -> Any:
    """Render with sandboxed Jinja, under the CPU-time limit; every failure becomes a TemplateFailure."""
    from jinja2 import TemplateSyntaxError, UndefinedError
    from jinja2.exceptions import SecurityError, TemplateError

    try:
        template = _compile(value)
        with _Deadline():
            out = template(variables)
    except UndefinedError as exc:
        msg = str(exc.message or exc)
        if "unsafe" in msg:
            raise TemplateFailure(path, f"refused by the template sandbox: {msg}") from None
        known = ", ".join(sorted(k for k in variables if not k.startswith("_")))
        raise TemplateFailure(path, f"{msg}; available variables: {known}") from None
    except SecurityError as exc:
        raise TemplateFailure(path, f"refused by the template sandbox: {exc}") from None
    except TemplateSyntaxError as exc:
        raise TemplateFailure(path, f"template syntax error: {exc.message}") from None
    except TemplateError as exc:
        raise TemplateFailure(path, f"template error: {exc}") from None
    except TimeoutError as exc:
        raise TemplateFailure(path, f"refused: {exc}") from None
    except (TypeError, ValueError, ArithmeticError, LookupError, AttributeError, RecursionError,
            MemoryError) as exc:
        raise TemplateFailure(path, f"template expression failed: {type(exc).__name__}: {exc}") from None
    if isinstance(out, str) and len(out) > _MAX_RENDERED:
        raise TemplateFailure(path, f"rendered value is longer than {_MAX_RENDERED} characters")
    return _jsonable(out, path)


_COMPILED: dict[int, tuple[Any, Callable[[Mapping[str, Any]], Any]]] = {}


def compiled(template: Any) -> Callable[[Mapping[str, Any]], Any]:
    """``render_value`` for one template, with the tree walk done once instead of once per pod.

    The returned function builds fresh dicts and lists on every call, so pods never share them.
    """
    hit = _COMPILED.get(id(template))
    if hit is not None and hit[0] is template:
        return hit[1]
    fn = _compile_tree(template, ())
    if len(_COMPILED) > 256:
        _COMPILED.clear()
    _COMPILED[id(template)] = (template, fn)
    return fn


def _compile_tree(value: Any, path: Loc) -> Callable[[Mapping[str, Any]], Any]:
    """A function that renders ``value`` with the given variables into fresh dicts and lists.

    Constant scalars are copied along with their container (``dict.copy``); only strings with
    ``{`` and nested containers are visited per call, which is what makes a template cheap to
    apply to thousands of pods.
    """
    if isinstance(value, str):
        return compile_string(value, path)
    if isinstance(value, (dict, list)):
        slots = value.items() if isinstance(value, dict) else enumerate(value)
        dynamic = [(k, _compile_tree(v, path + (k,))) for k, v in slots
                   if isinstance(v, (dict, list)) or (isinstance(v, str) and "{" in v)]
        static = dict(value) if isinstance(value, dict) else list(value)
        if not dynamic:
            return lambda variables: static.copy()

        def render(variables: Mapping[str, Any]) -> Any:
            out = static.copy()
            for k, f in dynamic:
                out[k] = f(variables)
            return out

        return render
    return lambda variables: value


def compile_string(value: str, path: Loc) -> Callable[[Mapping[str, Any]], Any]:
    """Plain ``{{ NAME }}`` references become a lookup or a ``str.format_map``, and ``{{ NAME|length }}``
    a ``len``; anything else, or a name that is not defined or not sized, goes through Jinja (which
    also words the error). A render that needs nothing else never imports Jinja."""
    if "{" not in value:
        return lambda variables: value
    length = LENGTH_REF.fullmatch(value)
    if length is not None:
        sized = length.group(1)

        def count(variables: Mapping[str, Any]) -> Any:
            items = variables.get(sized)
            if isinstance(items, _SIZED):
                return len(items)
            return _jinja_string(value, variables, path)

        return count
    parts = simple_parts(value)
    if parts is None:
        return lambda variables: _jinja_string(value, variables, path)
    if len(parts) == 3 and not parts[0].strip() and not parts[2].strip():
        name = parts[1]

        def whole(variables: Mapping[str, Any]) -> Any:
            if name not in variables:
                return _jinja_string(value, variables, path)
            return _jsonable(variables[name], path)

        return whole
    fmt = format_string(parts)

    def joined(variables: Mapping[str, Any]) -> Any:
        try:
            return fmt.format_map(variables)
        except KeyError:
            return _jinja_string(value, variables, path)

    return joined

