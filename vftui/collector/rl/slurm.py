"""--slurm: the inference servers of this job's SLURM allocation, found as atroposlib finds them.

The layout is atroposlib's own code (``ServerManager(slurm=True)``), run once here: the nodes
``scontrol show hostnames $SLURM_JOB_NODELIST`` lists, less the first NUM_TRAINING_NODES
(the trainer's), each with ``8 // INFER_TP`` servers on ports 9000, 9001, ... So vftui
balances exactly the servers an Atropos env on the same allocation would. atroposlib's quirks
are worked around here and nowhere else (README says so too):

- ``8 // os.environ.get("INFER_TP", 1)`` divides by a string whenever INFER_TP is set (a
  TypeError): its module is shown the environment with INFER_TP as a number.
- it runs scontrol through a shell with the node list unquoted (``gpu[1-4]`` is a glob that can
  match files in the working directory) and reads nothing of a failure, which then looks like a
  one-node allocation: scontrol runs here, without a shell, and its module is given what it
  printed.
- the node names scontrol lists go into URLs unchecked: one that is not a host name (``-x``,
  ``user@host``, ``a.example.com/#``, an escape) is refused, naming it.
- a missing NUM_TRAINING_NODES is ``int(None)``; a one-node allocation quietly keeps the
  servers it was configured with; no node left for inference gives no servers at all: each is
  refused with a sentence instead.
- its servers are built as it builds them only to be read: a stand-in takes the server class's
  place (a VLLMServer loads its tokenizer), and the run then balances the URLs as --base-url's.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import types
from collections.abc import Mapping, Sequence
from typing import Any
from unittest import mock
from urllib.parse import urlparse

from atroposlib.envs.server_handling import server_manager
from atroposlib.envs.server_handling.server_baseline import APIServerConfig

from vftui.bounds import LARGE
from vftui.errors import UserError
from vftui.text.printable import printable

# A host name as RFC 1123 has it: what a node's URL can hold, and never an option, a user@ or a path.
HOST_NAME = re.compile(
    r"(?=.{1,253}\Z)(?:(?!-)[A-Za-z0-9-]{1,63}(?<!-)\.)*(?!-)[A-Za-z0-9-]{1,63}(?<!-)"
)
GPUS_PER_NODE = 8  # atroposlib's ``8 // INFER_TP``
NAMED = 10  # nodes a sentence names (an allocation may have thousands); the others it counts
SHOWN_NAME = 80  # characters of a node name that is no host name a sentence shows
MAX_NODES = LARGE  # far more than any cluster has
SCONTROL_TIMEOUT_S = 30.0


def inference_urls(environ: Mapping[str, str] | None = None) -> list[str]:
    """The URLs (``http://NODE:PORT/v1``) of the allocation's inference servers; a UserError says what is
    missing."""
    environ = os.environ if environ is None else environ
    nodelist = environ.get("SLURM_JOB_NODELIST")
    if not nodelist:
        raise UserError(
            "--slurm finds the inference servers from SLURM_JOB_NODELIST, which is not set: run it "
            "inside a SLURM job (sbatch, salloc), or give --base-url instead"
        )
    training = _training_nodes(environ)
    tensor_parallel = _tensor_parallel(environ)
    nodes = hostnames(nodelist)
    if len(nodes) < 2:
        raise UserError(
            f"the SLURM allocation has one node ({nodes[0]}); --slurm trains on its first "
            "NUM_TRAINING_NODES nodes and serves inference on the rest, so it needs two or more: on one "
            "node, give each inference server with --base-url"
        )
    urls = _atroposlib_layout(nodes, environ, training, tensor_parallel)
    if not urls:
        raise UserError(
            f"the SLURM allocation's {len(nodes)} nodes ({_some(nodes, ', ')}) are all training nodes "
            f"(NUM_TRAINING_NODES={training}), so none is left for inference servers"
        )
    return urls


def hostnames(nodelist: str) -> list[str]:
    """``scontrol show hostnames``: the allocation's nodes, in SLURM's order (the training nodes first)."""
    command = ["scontrol", "show", "hostnames", nodelist]
    if shutil.which("scontrol") is None:
        raise UserError(
            "--slurm lists the allocation's nodes with scontrol, which is not on PATH: run it on a "
            "node of the SLURM cluster, or give --base-url instead"
        )
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, errors="replace", timeout=SCONTROL_TIMEOUT_S
        )
    except subprocess.TimeoutExpired as e:
        raise UserError(f"{' '.join(command)} did not answer in {SCONTROL_TIMEOUT_S:g} s") from e
    except OSError as e:
        raise UserError(f"cannot run scontrol: {e.strerror or e}") from e
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or ["it printed nothing"])[0]
        raise UserError(f"{' '.join(command)} failed (exit {done.returncode}): {said}")
    nodes = [line.strip() for line in done.stdout.splitlines() if line.strip()]
    if not nodes:
        raise UserError(f"{' '.join(command)} listed no nodes")
    if (
        len(nodes) > MAX_NODES
    ):  # atroposlib lays out 8 servers a node: a million nodes took minutes and 8 GB
        raise UserError(
            f"{' '.join(command)} listed {len(nodes):,} nodes, more than the {MAX_NODES:,} an allocation "
            "can have: give each inference server with --base-url"
        )
    if (bad := next((node for node in nodes if not HOST_NAME.fullmatch(node)), None)) is not None:
        shown = printable(bad[:SHOWN_NAME]) + ("…" if len(bad) > SHOWN_NAME else "")
        raise UserError(
            f"{' '.join(command)} listed {shown!r}, which is not a host name (dot-separated "
            "labels of letters, digits and inner hyphens, 63 characters at most each): vftui reaches "
            "no server there; give each inference server with --base-url"
        )
    return nodes


def described(urls: Sequence[str]) -> str:
    """The servers by node, for the start lines: ``2 inference servers in the SLURM allocation: gpu-2 (ports
    9000, 9001)``."""
    ports: dict[str, list[str]] = {}
    for url in urls:
        parsed = urlparse(url)
        ports.setdefault(parsed.hostname or url, []).append(str(parsed.port))
    nodes = [
        f"{node} (port{'s' if len(p) > 1 else ''} {', '.join(p)})" for node, p in ports.items()
    ]
    return f"{len(urls)} inference server{'s' if len(urls) > 1 else ''} in the SLURM allocation: {_some(nodes, '; ')}"


def _some(items: Sequence[str], between: str) -> str:
    """The first ``NAMED`` of ``items``, joined, and how many more there are."""
    more = f"{between}… ({len(items) - NAMED:,} more)" if len(items) > NAMED else ""
    return between.join(items[:NAMED]) + more


def _atroposlib_layout(
    nodes: list[str], environ: Mapping[str, str], training: int, tensor_parallel: int | None
) -> list[str]:
    """atroposlib's ServerManager(slurm=True) on ``nodes``, its module shown a mended environment."""
    mended: dict[str, str | int] = {**environ, "NUM_TRAINING_NODES": str(training)}
    if tensor_parallel is not None:
        mended["INFER_TP"] = tensor_parallel  # a number, as its ``8 // ...`` needs
    shown = types.SimpleNamespace(
        environ=mended, popen=lambda command: io.StringIO("\n".join(nodes))
    )
    with mock.patch.object(server_manager, "os", shown):
        manager = server_manager.ServerManager(
            [APIServerConfig(base_url="http://slurm/v1")], server_class=_Found, slurm=True
        )
    return [found.config.base_url for found in manager.servers]


class _Found:
    """Takes the server class's place in atroposlib's layout: the URL is what is wanted of it."""

    def __init__(self, config: APIServerConfig, **_: Any) -> None:
        self.config = config


def _training_nodes(environ: Mapping[str, str]) -> int:
    value = environ.get("NUM_TRAINING_NODES")
    if value is None:
        raise UserError(
            "--slurm needs NUM_TRAINING_NODES: how many of the allocation's first nodes train "
            "(atroposlib serves inference on the rest; 0 for none)"
        )
    number = _whole(value)
    if number is None or number < 0:
        raise UserError(
            f"NUM_TRAINING_NODES must be a whole number of nodes, 0 or more, not '{value}'"
        )
    return number


def _tensor_parallel(environ: Mapping[str, str]) -> int | None:
    """INFER_TP as a number, or None where it is not set (atroposlib then takes 1)."""
    value = environ.get("INFER_TP")
    if value is None:
        return None
    number = _whole(value)
    if number is None or not 1 <= number <= GPUS_PER_NODE:
        raise UserError(
            f"INFER_TP must be the GPUs each inference server uses, a whole number from 1 to "
            f"{GPUS_PER_NODE} (atroposlib runs {GPUS_PER_NODE} // INFER_TP servers on each inference "
            f"node), not '{value}'"
        )
    return number


def _whole(value: str) -> int | None:
    try:
        return int(value.strip())
    except ValueError:
        return None
