"""Check a manifest offline against a Kubernetes CRD's OpenAPI v3 schema, as strictly as ``kubectl --validate=strict``.

Test tooling, not product code. A CRD's ``openAPIV3Schema`` is a structural schema with ``x-kubernetes-*``
extensions. The API server *prunes* fields that it does not declare; strict field validation (``kubectl apply
--validate=strict``) *rejects* them instead, and that is what a test wants, so that a typo fails. ``strict_schema``
turns the CRD schema into a JSON Schema (draft 4, the base of OpenAPI 3.0's schema object) with that behaviour:

- an object schema with ``properties`` and neither ``additionalProperties`` nor
  ``x-kubernetes-preserve-unknown-fields: true`` gets ``additionalProperties: false``;
- ``x-kubernetes-preserve-unknown-fields: true`` keeps unknown fields allowed there (without a ``type``: any value);
- ``x-kubernetes-int-or-string: true`` accepts an integer or a string (CRDs spell it with an ``anyOf`` too; one is
  added where it is missing);
- ``x-kubernetes-embedded-resource: true`` also allows the embedded object's ``apiVersion``, ``kind`` and ``metadata``;
- ``nullable: true`` also accepts ``null``.

Not checked: CEL rules (``x-kubernetes-validations``), ``format`` (int32, date-time, ...), the uniqueness that
``x-kubernetes-list-type: set/map`` implies, and the root ``metadata`` (ObjectMeta, which the API server validates
itself; the CRD declares it as a bare object).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import jsonschema

_PRESERVE = "x-kubernetes-preserve-unknown-fields"
_INT_OR_STRING = [{"type": "integer"}, {"type": "string"}]


def strict_schema(node: Any) -> Any:
    """A copy of CRD schema ``node`` as a JSON Schema that refuses undeclared fields (see the module's docstring)."""
    if isinstance(node, list):
        return [strict_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("properties", "patternProperties", "definitions"):  # maps of name -> schema, not schemas
            out[key] = {name: strict_schema(sub) for name, sub in value.items()}
        elif key in ("enum", "default", "example", "required"):  # values, not schemas
            out[key] = value
        else:
            out[key] = strict_schema(value)
    if out.get("x-kubernetes-embedded-resource"):
        out["properties"] = {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                             "metadata": {"type": "object"}, **out.get("properties", {})}
    if "properties" in out and "additionalProperties" not in out and not out.get(_PRESERVE):
        out["additionalProperties"] = False
    if out.get("x-kubernetes-int-or-string") and "anyOf" not in out:
        out["anyOf"] = _INT_OR_STRING
    if out.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"] if isinstance(out["type"], str) else [*out["type"], "null"]
    return out


def load_strict_schema(path: Path) -> dict[str, Any]:
    """The vendored CRD schema at ``path`` (JSON), made strict and checked to be a valid draft-4 schema."""
    schema = strict_schema(json.loads(path.read_text()))
    jsonschema.Draft4Validator.check_schema(schema)
    return schema


def _dotted(path: Iterable[str | int]) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "<root>"


def validation_errors(document: Any, schema: dict[str, Any]) -> list[str]:
    """Every way ``document`` breaks ``schema``, one ``"dotted.path[0].field: message"`` line each, in path order."""
    errors = jsonschema.Draft4Validator(schema).iter_errors(document)
    return sorted(f"{_dotted(error.absolute_path)}: {error.message}" for error in errors)
