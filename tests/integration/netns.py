"""Hosts of their own for integration tests: Linux network namespaces joined by a bridge.

The broker listens on the bridge's address in the test's namespace; each worker runs in a network
namespace of its own (``ip netns exec``), linked to the bridge by a veth pair. Cutting a worker off
takes its link down: its packets, and the broker's to it, are dropped (no RST), as when a host
falls off the network; healing takes it up again.

Names carry the test process's pid (the integration tests run on two pytest-xdist workers at once),
and a subnet is picked per process. Whatever a crashed earlier run left behind is removed at start,
but only for pids that are gone. Needs root and ``ip``: :func:`unavailable` says why not.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

PREFIX = "asn"  # every name made here starts with it, then the pid


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def unavailable() -> str | None:
    """Why namespaces cannot be made here (None: they can)."""
    if shutil.which("ip") is None:
        return "no `ip` command (iproute2)"
    if os.geteuid() != 0:
        return "making network namespaces needs root"
    probe = f"{PREFIX}{os.getpid()}probe"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"`ip netns add` failed: {made.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale() -> None:
    """Namespaces and bridges left by test processes that no longer exist."""
    names = _ip("netns", "list", check=False).stdout.split()
    links = re.findall(r"^\d+: ([^:@]+)", _ip("-o", "link", "show", check=False).stdout, re.M)
    for name in [*names, *links]:
        m = re.match(rf"{PREFIX}(\d+)", name)
        if m and not _alive(int(m.group(1))):
            if name in names:
                _ip("netns", "del", name, check=False)
            else:
                _ip("link", "del", name, check=False)


@dataclass
class Network:
    """A bridge on 10.77.<n>.0/24 (the broker at .1) and the hosts attached to it."""

    subnet: int
    bridge: str
    hosts: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (namespace, root-side veth)

    @property
    def gateway(self) -> str:
        return f"10.77.{self.subnet}.1"

    def add_host(self, name: str) -> list[str]:
        """A namespace linked to the bridge; returns the command prefix that runs a process in it."""
        index = len(self.hosts) + 1
        ns = f"{PREFIX}{os.getpid()}{name}"
        outer, inner = f"{PREFIX}{os.getpid()}r{index}", f"{PREFIX}{os.getpid()}n{index}"
        _ip("netns", "add", ns)
        _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
        _ip("link", "set", inner, "netns", ns)
        _ip("link", "set", outer, "master", self.bridge)
        _ip("link", "set", outer, "up")
        _ip("netns", "exec", ns, "ip", "addr", "add", f"10.77.{self.subnet}.{10 + index}/24", "dev", inner)
        _ip("netns", "exec", ns, "ip", "link", "set", inner, "up")
        _ip("netns", "exec", ns, "ip", "link", "set", "lo", "up")
        self.hosts[name] = (ns, outer)
        return ["ip", "netns", "exec", ns]

    def cut(self, name: str) -> None:
        """The host's link goes down: nothing reaches it or leaves it."""
        _ip("link", "set", self.hosts[name][1], "down")

    def heal(self, name: str) -> None:
        _ip("link", "set", self.hosts[name][1], "up")

    def remove(self) -> None:
        for ns, outer in self.hosts.values():
            _ip("link", "del", outer, check=False)  # takes its peer in the namespace with it
            _ip("netns", "del", ns, check=False)
        _ip("link", "del", self.bridge, check=False)


@contextmanager
def network() -> Iterator[Network]:
    """A bridge with the broker's address, removed with every host at the end (also on failure)."""
    remove_stale()
    pid = os.getpid()
    net = Network(subnet=20 + pid % 200, bridge=f"{PREFIX}{pid}br")
    try:
        _ip("link", "add", net.bridge, "type", "bridge")
        _ip("addr", "add", f"{net.gateway}/24", "dev", net.bridge)
        _ip("link", "set", net.bridge, "up")
        yield net
    finally:
        net.remove()
