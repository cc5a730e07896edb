"""StrictLoader's own ``resolve`` (the resolver lists put together once) tags every node as
PyYAML's general ``resolve`` does for the same loader: only the speed may differ."""

from __future__ import annotations

import yaml
from hypothesis import given
from hypothesis import strategies as st

from bundle_mcp.loader.strict_yaml import STR_TAG, TYPED_WORDS, StrictLoader, implicit_tag

SAMPLES = [
    "", "~", "null", "Null", "NULL", "true", "True", "yes", "no", "on", "off", "y", "n",
    "false", "FALSE", "0", "-1", "+12", "0x1F", "0o17", "017", "1_000", "1.5", "-.inf", ".NaN",
    "1e3", "6.8523015e+5", "2026-12-03", "2026-12-03T10:00:00Z", "<<", "=", "abc", "-", ":",
    "12:30", "190:20:30", "0b101", "é", "日本", "tag:yaml.org,2002:str",
]


def _general(kind: type[yaml.Node], value: str, implicit: tuple[bool, bool]) -> str:
    loader = StrictLoader("")
    try:
        tag: str = yaml.resolver.BaseResolver.resolve(loader, kind, value, implicit)
        return tag
    finally:
        loader.dispose()


def _ours(kind: type[yaml.Node], value: str, implicit: tuple[bool, bool]) -> str:
    loader = StrictLoader("")
    try:
        return loader.resolve(kind, value, implicit)
    finally:
        loader.dispose()


def test_the_samples_resolve_alike() -> None:
    for value in SAMPLES:
        for implicit in ((True, False), (False, True), (False, False), (True, True)):
            assert _ours(yaml.ScalarNode, value, implicit) == _general(
                yaml.ScalarNode, value, implicit), (value, implicit)
    for kind in (yaml.SequenceNode, yaml.MappingNode):
        assert _ours(kind, None, (True, False)) == _general(kind, None, (True, False))


@given(st.text(max_size=12), st.booleans())
def test_any_scalar_resolves_alike(value: str, plain: bool) -> None:
    implicit = (plain, not plain)
    assert _ours(yaml.ScalarNode, value, implicit) == _general(yaml.ScalarNode, value, implicit)


def _typed_by_words(value: str) -> bool:
    pattern = TYPED_WORDS.get(value[:1])
    return pattern is not None and pattern.match(value) is not None


def test_typed_words_say_what_resolve_types() -> None:
    """TYPED_WORDS (one pattern per first character, for the compiled YAML path) says a plain
    word is typed exactly when StrictLoader's resolve gives it a tag other than str."""
    for value in SAMPLES:
        assert _typed_by_words(value) == (implicit_tag(value) != STR_TAG), value
        assert implicit_tag(value) == _general(yaml.ScalarNode, value, (True, False)), value


@given(st.one_of(st.text(max_size=12), st.from_regex(r"[-+.0-9_:eE]{1,10}", fullmatch=True)))
def test_any_word_is_typed_alike(value: str) -> None:
    assert _typed_by_words(value) == (implicit_tag(value) != STR_TAG)
