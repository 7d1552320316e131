"""deploy/ read as Kubernetes and Docker would read it, without either: the kustomizations' resources and
patches, the StatefulSet's pod (command, environment with ``$(VAR)`` references expanded as the kubelet
does, ports, probes, volumes) and the Dockerfile's stages and instructions. tests/integration/test_deploy.py
checks them and runs real worker processes with what they say."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .cluster import ROOT

DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
BASE = K8S / "base"
OVERLAYS = sorted(p for p in (K8S / "overlays").iterdir() if (p / "kustomization.yaml").is_file())
DOCKERFILE = DEPLOY / "Dockerfile"

Obj = dict[str, Any]


def load(path: Path) -> list[Obj]:
    """Every document of a YAML file (empty ones dropped); each must be a mapping."""
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    for d in docs:
        assert isinstance(d, dict), f"{path}: a document is not a mapping"
    return docs


def key(obj: Obj) -> tuple[str, str]:
    return obj["kind"], obj["metadata"]["name"]


@dataclass
class Kustomization:
    directory: Path
    spec: Obj

    @classmethod
    def read(cls, directory: Path) -> Kustomization:
        (spec,) = load(directory / "kustomization.yaml")
        assert spec.get("kind") == "Kustomization", f"{directory}: not a Kustomization"
        return cls(directory, spec)

    def resources(self) -> list[Obj]:
        """The objects its resources give: files read, directories built as kustomizations (patches
        not applied: checked separately)."""
        out: list[Obj] = []
        for entry in self.spec.get("resources", []):
            path = (self.directory / entry).resolve()
            assert path.exists(), f"{self.directory}/kustomization.yaml lists {entry}, which does not exist"
            if path.is_dir():
                assert (path / "kustomization.yaml").is_file(), f"{entry}: a directory without a kustomization.yaml"
                out.extend(Kustomization.read(path).resources())
            else:
                out.extend(load(path))
        return out

    def patches(self) -> list[tuple[str, Obj]]:
        """(file, strategic merge patch) for each entry of ``patches`` (inline or by path)."""
        out = []
        for entry in self.spec.get("patches", []):
            assert "target" not in entry or "patch" in entry or "path" in entry, entry
            if "path" in entry:
                path = self.directory / entry["path"]
                assert path.is_file(), f"{self.directory}: patch {entry['path']} does not exist"
                out.extend((entry["path"], doc) for doc in load(path))
            else:
                out.extend(("inline", doc) for doc in yaml.safe_load_all(entry["patch"]))
        return out


def statefulset(objects: list[Obj]) -> Obj:
    (sts,) = [o for o in objects if o["kind"] == "StatefulSet"]
    return sts


def container(sts: Obj, name: str = "worker") -> Obj:
    (c,) = [c for c in sts["spec"]["template"]["spec"]["containers"] if c["name"] == name]
    return c


_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def expand(value: str, defined: dict[str, str]) -> str:
    """The kubelet's expansion: ``$(VAR)`` of a variable defined earlier, ``$$`` -> ``$``; others kept."""

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        return defined.get(m.group(1), m.group(0))

    return _REF.sub(sub, value)


def pod_environment(c: Obj, pod: dict[str, str]) -> dict[str, str]:
    """The container's environment in the pod whose fields ``pod`` gives (``metadata.name``,
    ``metadata.namespace``, ``spec.nodeName``): ``fieldRef`` values looked up there, ``$(VAR)`` expanded
    in order. Secrets and config maps are not used by the kit (refused here, so none slips in untested)."""
    env: dict[str, str] = {}
    for var in c.get("env", []):
        if "value" in var:
            env[var["name"]] = expand(str(var["value"]), env)
        else:
            ref = var["valueFrom"]
            assert set(ref) == {"fieldRef"}, f"{var['name']}: only fieldRef is read by the tests"
            env[var["name"]] = pod[ref["fieldRef"]["fieldPath"]]
    assert not c.get("envFrom"), "envFrom is not read by the tests"
    return env


def port(c: Obj, ref: int | str) -> int:
    """A probe's port: a number, or the name of one of the container's ports."""
    if isinstance(ref, int):
        return ref
    (p,) = [p["containerPort"] for p in c.get("ports", []) if p.get("name") == ref]
    return int(p)


@dataclass
class Stage:
    name: str
    base: str
    instructions: list[tuple[str, str]]  # (INSTRUCTION, rest), continuation lines joined

    def all(self, instruction: str) -> list[str]:
        return [rest for ins, rest in self.instructions if ins == instruction]


def dockerfile_stages(path: Path = DOCKERFILE) -> list[Stage]:
    """The Dockerfile's stages, in order, with their instructions (comments dropped, ``\\`` joined)."""
    lines: list[str] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        lines.append(pending + line)
        pending = ""
    assert not pending, "the Dockerfile ends inside a continued line"
    stages: list[Stage] = []
    for line in lines:
        instruction, _, rest = line.partition(" ")
        instruction = instruction.upper()
        if instruction == "FROM":
            words = rest.split()
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else str(len(stages))
            stages.append(Stage(name, words[0], []))
        else:
            assert stages, f"{instruction} before the first FROM"
            stages[-1].instructions.append((instruction, rest.strip()))
    return stages


def exec_form(rest: str) -> list[str]:
    """A JSON (exec form) CMD/ENTRYPOINT/VOLUME; the shell form is refused (a shell would get SIGTERM)."""
    value = json.loads(rest)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), rest
    return value


def env_instruction(rest: str) -> dict[str, str]:
    """``ENV a=b c=d`` (the key=value form)."""
    out = {}
    for word in shlex.split(rest):
        name, eq, value = word.partition("=")
        assert eq, f"ENV {rest!r}: use the key=value form"
        out[name] = value
    return out
