"""Config sections whose class is chosen by ``type`` through the registry, so a plugin's section validates like a
built-in one.

``section(kind, base, default=...)`` is the annotation of such a field: a mapping is validated by the config class
registered under its ``type`` (``default`` when it names none), a bare string ``"x"`` stands for ``{type: x}``, an
unknown type says ``unknown <kind> 'x'; known: ...``, and errors inside the section keep their dotted path
(``training.method.passes``). Dumping writes the chosen class's own fields, so a dumped config validates back to an
equal one.

>>> from pydantic import TypeAdapter
>>> from ecdysis.evolution.methods import MethodSection
>>> TypeAdapter(section("method", MethodSection, default="ecdysis")).validate_python("ecdysis-fdcr").passes
2
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, PlainValidator, SerializeAsAny

from ecdysis.extensions.registry import LABELS, Kind, lookup, names

B = TypeVar("B", bound=BaseModel)


def section(kind: Kind, base: type[B], *, default: str | None = None) -> Any:
    """The annotation of a config field holding one ``kind`` section (instances of ``base``)."""

    def validate(value: Any) -> B:
        return validate_section(kind, base, value, default=default)

    return Annotated[SerializeAsAny[base], PlainValidator(validate)]  # type: ignore[valid-type,misc]


def validate_section(kind: Kind, base: type[B], value: Any, *, default: str | None = None) -> B:
    """``value`` (an instance, a mapping with ``type`` or a bare name) as the registered section it names."""
    if isinstance(value, base):
        return value
    if isinstance(value, str):
        value = {"type": value}
    if not isinstance(value, Mapping):
        raise ValueError(f"expected a mapping with 'type', or the name of a {LABELS[kind]}")
    name = value.get("type", default)
    if name is None:
        raise ValueError(f"'type' is required: the name of a {LABELS[kind]}; known: {', '.join(names(kind))}")
    config = lookup(kind, str(name)).config  # UnknownExtension is a ValueError: pydantic reports it on this path
    if config is None or not issubclass(config, base):
        raise ValueError(f"{LABELS[kind]} {name!r} has no config section of this kind")
    return config.model_validate({**value, "type": name})
