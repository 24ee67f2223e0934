"""`moim serve` runs with glibc's arena limit (proxy/runtime.py `MALLOC_ARENAS`) in force.

The limit was set in the app's lifespan, after `moim serve` had opened the store, whose
lexical index starts tantivy's threads: each of them got an arena of its own before the
limit came, and the server ran with eight. The server here is a real subprocess, ready (its
model loaded, the writer started), and its arenas are counted from outside: every glibc heap
beside the main one is a 64 MiB-aligned mapping that starts with a pointer to its arena
(glibc's `heap_info.ar_ptr`), so the arenas are the main one and the distinct pointers
found there that point into such a heap.
"""

import os
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from memory import heap
from proxy import runtime

pytestmark = pytest.mark.skipif(heap._LIBC is None, reason="glibc only")

REPO = Path(__file__).resolve().parents[2]
HEAP_ALIGN = 64 << 20  # glibc's HEAP_MAX_SIZE on 64-bit: each heap is aligned to it


def arenas(pid: int) -> int:
    """glibc arenas of process `pid`: the main one and one per distinct `heap_info.ar_ptr`."""
    heaps = []
    with open(f"/proc/{pid}/maps") as maps:
        for line in maps:
            fields = line.split()
            start = int(fields[0].split("-")[0], 16)
            if start % HEAP_ALIGN == 0 and fields[1] == "rw-p" and len(fields) == 5:
                heaps.append(start)
    owners = set()
    with open(f"/proc/{pid}/mem", "rb") as mem:
        for start in heaps:
            mem.seek(start)
            (owner,) = struct.unpack("<Q", mem.read(8))
            if any(h <= owner < h + HEAP_ALIGN for h in heaps):
                owners.add(owner)
    return 1 + len(owners)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_moim_serve_runs_with_at_most_the_arenas_it_sets(tmp_path):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MOIM_")}
    env.update(
        MOIM_DB=str(tmp_path / "moim.db"),
        MOIM_UPSTREAM_BASE_URL="http://127.0.0.1:9",  # never asked: no request is sent
        PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""),
    )
    with (tmp_path / "moim.log").open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "proxy.cli", "serve", "--port", str(port)],
            env=env,
            cwd=tmp_path,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 60
            while True:  # ready: the model is loaded and the writer started
                assert process.poll() is None, (tmp_path / "moim.log").read_text()
                assert time.monotonic() < deadline, "moim did not become ready"
                try:
                    url = f"http://127.0.0.1:{port}/health/readiness"
                    if httpx.get(url, timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                time.sleep(0.05)
            try:
                count = arenas(process.pid)
            except PermissionError:  # a kernel that lets no process read another's memory
                pytest.skip("/proc/PID/mem of a child is not readable here (ptrace scope)")
            assert count <= runtime.MALLOC_ARENAS
        finally:
            process.terminate()
            process.wait(30)
