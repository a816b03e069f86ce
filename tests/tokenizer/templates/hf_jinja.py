"""Renders templates with the real jinja2, configured the way transformers' apply_chat_template
configures it (transformers/utils/chat_template_utils.py): ImmutableSandboxedEnvironment with
trim_blocks, lstrip_blocks, loopcontrols and a {% generation %} tag, plus its own tojson,
raise_exception and strftime_now. Used by make_expected.py to produce the expected outputs that
the C++ tests compare against."""
import json
from datetime import datetime

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class GenerationTag(Extension):
    """{% generation %}...{% endgeneration %} renders its body unchanged."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def _raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def _strftime_now(fmt):
    return datetime.now().strftime(fmt)


def environment(hf=True):
    if hf:
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                            extensions=[GenerationTag, loopcontrols])
    else:
        env = ImmutableSandboxedEnvironment(extensions=[GenerationTag, loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


def render(source, variables, hf=True):
    """Returns ("ok", text) or ("error", "ExceptionType: message")."""
    try:
        return "ok", environment(hf).from_string(source).render(**variables)
    except Exception as e:  # noqa: BLE001 - any failure is an expected error case
        return "error", f"{type(e).__name__}: {e}"
