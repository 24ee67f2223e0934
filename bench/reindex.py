"""Re-index a copy of a replayed database with this checkout's ingest (for bench/tune_recall.py).

Ingest-side changes (what text a chunk's vector is computed from) only show on vectors made
by the new code. This copies `SRC` to `DST`, drops every chunk, FTS row and vector, and
indexes every message again (~1 min for LoCoMo's 5,882 turns on two cores).

    PYTHONPATH=. /work/venv/bin/python bench/reindex.py /tmp/locomo.db /tmp/locomo-new.db
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memory import Settings  # noqa: E402
from memory.layer import MemoryLayer  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("src", type=Path, help="a replayed database (left unchanged)")
    parser.add_argument("dst", type=Path, help="the re-indexed copy (overwritten)")
    args = parser.parse_args()
    shutil.copyfile(args.src, args.dst)
    layer = MemoryLayer(Settings(db_path=args.dst))
    started = time.perf_counter()
    pending = layer.store.reset_index()
    done = layer.index_pending()
    print(f"re-indexed {done} of {pending} messages in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
