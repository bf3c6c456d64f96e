"""Validate Kubernetes manifests offline, strictly: unknown fields and wrong types are errors.

Run with the Python of the kubernetes-validate virtualenv that scripts/build-k8s-tools.sh installs (it has
kubernetes_validate, jsonschema and PyYAML), not the project's:

    python k8s_schemas.py --kube-version 1.30 --crds DIR manifests.yaml ...

Kinds of the Kubernetes API are checked against kubernetes-validate's strict schemas of that release. Custom
resources (ServiceMonitor, PrometheusRule) are checked against the openAPIV3Schema of their CustomResourceDefinition
found in --crds, made strict the way the API server prunes: an object schema with properties and neither
additionalProperties nor x-kubernetes-preserve-unknown-fields admits no other field. A kind with no schema is
an error, never a skip. Prints a JSON list of {"document", "kind", "name", "error"}; exits 1 when it is not
empty.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import jsonschema
import kubernetes_validate
import yaml


def strict(schema: object) -> object:
    """A CRD's structural schema as strict JSON Schema."""
    if isinstance(schema, list):
        return [strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strict(v) for k, v in schema.items()}
    if out.pop("x-kubernetes-int-or-string", False):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    preserve = out.pop("x-kubernetes-preserve-unknown-fields", False)
    if "properties" in out and "additionalProperties" not in out and not preserve:
        out["additionalProperties"] = False
    return out


def crd_schemas(folder: Path | None) -> dict[tuple[str, str], dict]:
    """(apiVersion, kind) -> JSON Schema of every served version of every CRD in the folder."""
    found: dict[tuple[str, str], dict] = {}
    for path in sorted(folder.glob("*.yaml")) if folder else []:
        for crd in yaml.safe_load_all(path.read_text()):
            if not crd or crd.get("kind") != "CustomResourceDefinition":
                continue
            spec = crd["spec"]
            for version in spec["versions"]:
                schema = strict(version["schema"]["openAPIV3Schema"])
                schema.setdefault("properties", {})
                schema["properties"]["metadata"] = {"type": "object"}  # checked by the API server, not the CRD
                schema["properties"]["apiVersion"] = {"type": "string"}
                schema["properties"]["kind"] = {"type": "string"}
                found[(f"{spec['group']}/{version['name']}", spec["names"]["kind"])] = schema
    return found


def errors_of(document: dict, kube_version: str, crds: dict[tuple[str, str], dict]) -> list[str]:
    key = (document.get("apiVersion"), document.get("kind"))
    if key in crds:
        validator = jsonschema.Draft7Validator(crds[key])
        return [f"{'.'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
                for e in sorted(validator.iter_errors(document), key=str)]
    try:
        kubernetes_validate.validate(document, kube_version, strict=True)
    except kubernetes_validate.SchemaNotFoundError as exc:
        return [exc.message]
    except kubernetes_validate.ValidationError as exc:
        return [f"{'.'.join(map(str, exc.path)) or '(top)'}: {exc.message}"]
    return []


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kube-version", required=True)
    parser.add_argument("--crds", type=Path)
    parser.add_argument("files", nargs="+", type=Path)
    args = parser.parse_args(argv)
    crds = crd_schemas(args.crds)
    problems = []
    for path in args.files:
        for index, document in enumerate(yaml.safe_load_all(path.read_text())):
            if not document:
                continue
            for error in errors_of(document, args.kube_version, crds):
                problems.append({"document": f"{path.name}#{index}", "kind": document.get("kind"),
                                 "name": (document.get("metadata") or {}).get("name"), "error": error})
    print(json.dumps(problems, indent=1))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
