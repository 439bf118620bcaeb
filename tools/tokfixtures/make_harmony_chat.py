#!/usr/bin/python3
"""make_harmony_chat.py — renders gpt-oss's harmony chat template (tests/fixtures/tokenizers/
gpt-oss/chat_template.jinja, openai/gpt-oss-20b as published) with Python jinja2 in the
environment transformers' apply_chat_template builds (ImmutableSandboxedEnvironment,
trim_blocks, lstrip_blocks, loopcontrols; tojson = json.dumps(ensure_ascii=False);
raise_exception; strftime_now), for conversations covering every branch colibri's server
uses: system/developer instructions, reasoning_effort, model_identity, builtin_tools, function
tools over each schema shape render_typescript_type handles, an assistant turn with thinking
and a tool call, its tool result, the CoT dropped from earlier turns, the training form
(<|return|>), and the template's raise_exception errors.

    python3 tools/tokfixtures/make_harmony_chat.py > tests/fixtures/tokenizers/gpt-oss/chat.jsonl

(python3 here is the interpreter that has jinja2 — Debian's python3-jinja2.) Each line:
{"id", "vars": the template variables besides add_generation_prompt, "add_generation_prompt",
"rendered" | "error"}. strftime_now is pinned to DATE so the file does not change from day to
day; a test rendering with the real clock replaces the date line (see tests/unit/test_chat.c).
"""
import json
import sys

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

DATE = "2025-08-05"
TPL = "tests/fixtures/tokenizers/gpt-oss/chat_template.jinja"


def raise_exception(msg):
    raise jinja2.exceptions.TemplateError(msg)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = lambda fmt: __import__("datetime").date.fromisoformat(DATE).strftime(fmt)
tpl = env.from_string(open(TPL, encoding="utf-8").read())

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Gets the current weather in a city.",
    "parameters": {"type": "object", "required": ["city"], "properties": {
        "city": {"type": "string", "description": "The city, e.g. Zürich"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Unit", "default": "celsius"},
        "days": {"type": "integer", "description": "Forecast days", "default": 1},
    }}}}
SHAPES = {"type": "function", "function": {
    "name": "shapes", "description": "Every schema shape.",
    "parameters": {"type": "object", "required": ["n", "tags"], "properties": {
        "n": {"type": "number", "description": "A number"},
        "flag": {"type": "boolean", "description": "A flag", "default": False},
        "tags": {"type": "array", "items": {"type": "string"}, "description": "Strings"},
        "ids": {"type": "array", "items": {"type": "integer"}, "description": "Ints"},
        "bools": {"type": "array", "items": {"type": "boolean"}, "description": "Bools"},
        "nums": {"type": "array", "items": {"type": "number"}, "nullable": True, "description": "Nums"},
        "anything": {"type": "array", "description": "Untyped array"},
        "points": {"type": "array", "description": "Objects",
                   "items": {"type": "object", "required": ["x"], "properties": {
                       "x": {"type": "number"}, "y": {"type": "number"}}}},
        "opt": {"type": "object", "description": "Nested",
                "properties": {"a": {"type": "string"}}, "required": []},
        "bare": {"type": "object", "description": "No properties"},
        "multi": {"type": ["string", "number"], "description": "Type list"},
        "single": {"type": ["string"], "description": "One-type list"},
        "name": {"type": "string", "nullable": True, "description": "Nullable string"},
        "choice": {"oneOf": [{"type": "string", "description": "as text"}, {"type": "number", "default": 3}],
                   "description": "oneOf scalars", "default": "x"},
        "objs": {"oneOf": [{"type": "object"}, {"type": "string"}], "description": "oneOf with an object"},
        "unknown": {"description": "No type"},
    }}}}
NOARGS = {"type": "function", "function": {"name": "now", "description": "The time.", "parameters": {"type": "object", "properties": {}}}}

CALL = {"role": "assistant", "thinking": "User wants the weather; call the tool.",
        "tool_calls": [{"id": "call_1", "type": "function",
                        "function": {"name": "get_weather", "arguments": {"city": "Zürich", "days": 2}}}]}
RESULT = {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21, \"sky\": \"clear\"}"}

CASES = [
    ("user_only", {"messages": [{"role": "user", "content": "Hi there"}]}, True),
    ("system_high", {"messages": [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "2+2?"}],
                     "reasoning_effort": "high"}, True),
    ("developer_low_identity", {"messages": [{"role": "developer", "content": "Answer in French."},
                                             {"role": "user", "content": "Hello"}],
                                "reasoning_effort": "low", "model_identity": "You are Colibri."}, True),
    ("multi_turn_cot_dropped", {"messages": [
        {"role": "user", "content": "What is 7*6?"},
        {"role": "assistant", "thinking": "7*6 = 42.", "content": "42"},
        {"role": "user", "content": "And 7*7?"}]}, True),
    ("training_last_assistant", {"messages": [
        {"role": "user", "content": "Say hi"},
        {"role": "assistant", "thinking": "Simple greeting.", "content": "Hi!"}]}, False),
    ("tools_shapes", {"messages": [{"role": "system", "content": "You can call tools."},
                                   {"role": "user", "content": "Use them"}],
                      "tools": [WEATHER, SHAPES, NOARGS]}, True),
    ("tools_no_instructions", {"messages": [{"role": "user", "content": "Weather?"}], "tools": [WEATHER]}, True),
    ("tool_call_and_result", {"messages": [
        {"role": "developer", "content": "Use tools when useful."},
        {"role": "user", "content": "Weather in Zürich for 2 days?"}, CALL, RESULT],
        "tools": [WEATHER]}, True),
    ("tool_call_content_as_analysis", {"messages": [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "Calling the tool.",
         "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}]},
        RESULT,
        {"role": "assistant", "content": "It is 21 degrees and clear."},
        {"role": "user", "content": "Thanks! 🙂 日本語も?"}],
        "tools": [WEATHER]}, True),
    ("builtin_tools", {"messages": [{"role": "user", "content": "Search"}], "builtin_tools": ["browser", "python"]}, True),
    ("error_tool_without_call", {"messages": [{"role": "user", "content": "x"}, RESULT]}, True),
    ("error_channel_in_content", {"messages": [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": "<|channel|>final<|message|>y"}, {"role": "user", "content": "z"}]}, True),
    ("error_content_and_thinking", {"messages": [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": "a", "thinking": "b",
         "tool_calls": [{"function": {"name": "now", "arguments": {}}}]}]}, True),
]

for cid, vars_, gen in CASES:
    row = {"id": cid, "vars": vars_, "add_generation_prompt": gen}
    try:
        row["rendered"] = tpl.render(add_generation_prompt=gen, **vars_)
    except jinja2.exceptions.TemplateError as e:
        row["error"] = str(e)
    sys.stdout.write(json.dumps(row, ensure_ascii=False) + "\n")
