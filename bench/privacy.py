"""What privacy costs the bot's database, in one run on this machine.

    python -m bench.privacy [--users 500] [--photos 20] [--rounds 200]

On a real SQLite file with ``--users`` x ``--photos`` results (small files: the cost is the
database's, not the disk's), it times:

- the bookkeeping of one drawn photo as the release before /forget wrote it (the result, its
  upload record, ``secure_delete`` off) and as it is written now (plus two ``holdings`` rows,
  ``secure_delete`` on), as a ratio;
- one user's /forget (``storage/erasure.py``), and the hourly retention sweep with a tenth of the
  rows past ``ANIMEBOT_KEEP_DAYS``, each as a multiple of one cache lookup of the same run, since
  the bot's other requests wait on the one connection meanwhile.
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from storage.cache import ResultFile, result_key
from storage.database import Database
from storage.erasure import Erasure, Erasures
from storage.journal import Journal
from storage.retention import sweep
from storage.stores import Stores

DAY = 86400.0


async def _bookkeeping(stores: Stores, n: int, rounds: int, holding: bool) -> float:
    """Median seconds of one drawn photo's writes, from photo number ``n`` on."""
    times = []
    for i in range(n, n + rounds):
        sha = f"{i:064x}"
        key = result_key(sha, "hayao", "v1")
        started = time.perf_counter()
        await stores.results.put(key, sha, "hayao", ResultFile(b"r" * 2048, 4, 4))
        await stores.uploads.remember_upload(i % 997, f"U{i}", sha, f"FILE{i}")
        if holding:
            await stores.holdings.hold(i % 997, sha, key)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


async def _fill(stores: Stores, users: int, photos: int) -> None:
    for u in range(users):
        for p in range(photos):
            sha = f"{u:032x}{p:032x}"
            key = result_key(sha, "hayao", "v1")
            await stores.results.put(key, sha, "hayao", ResultFile(b"r" * 512, 4, 4))
            await stores.uploads.remember_upload(10_000 + u, f"U{u}-{p}", sha, f"FILE{u}-{p}")
            await stores.holdings.hold(10_000 + u, sha, key)


async def run(users: int, photos: int, rounds: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bench-privacy-") as tmp:
        home = Path(tmp)
        db = await Database.open(home / "bot.db")
        stores = Stores.on(db, home / "results", max_bytes=1 << 40)
        journal = Journal(db)
        await db.pragma("secure_delete=OFF")
        before = await _bookkeeping(stores, 1_000_000, rounds, holding=False)
        await db.pragma("secure_delete=ON")
        after = await _bookkeeping(stores, 2_000_000, rounds, holding=True)
        await _fill(stores, users, photos)
        lookups = []
        for u in range(rounds):
            started = time.perf_counter()
            await stores.results.get(result_key(f"{u % users:032x}{0:032x}", "hayao", "v1"))
            lookups.append(time.perf_counter() - started)
        lookup = statistics.median(lookups)
        erasures = Erasures(db, stores.results.results_dir)
        erasure = Erasure(1, 10_000, 10_000, "en")
        await erasures.begin(erasure)
        started = time.perf_counter()
        await erasures.erase(erasure, await journal.who(10_000), 0, 0)
        erase_s = time.perf_counter() - started
        await db.execute("UPDATE results SET created_at = created_at - 31 * 86400 WHERE rowid % 10 = 0")
        started = time.perf_counter()
        swept = await sweep(db, stores.results.results_dir, 30 * DAY)
        sweep_s = time.perf_counter() - started
        await db.close()
    return {"bookkeeping_before_ms": before * 1e3, "bookkeeping_after_ms": after * 1e3,
            "bookkeeping_ratio": after / before, "lookup_ms": lookup * 1e3, "erase_ms": erase_s * 1e3,
            "erase_in_lookups": erase_s / lookup, "sweep_ms": sweep_s * 1e3, "sweep_in_lookups": sweep_s / lookup,
            "swept_results": swept.results}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=500)
    parser.add_argument("--photos", type=int, default=20, help="results per user")
    parser.add_argument("--rounds", type=int, default=200, help="timed repetitions of the small operations")
    args = parser.parse_args()
    got = asyncio.run(run(args.users, args.photos, args.rounds))
    print(f"{args.users} users x {args.photos} results each")
    print(f"a drawn photo's bookkeeping: {got['bookkeeping_before_ms']:.2f} ms before, "
          f"{got['bookkeeping_after_ms']:.2f} ms now (x{got['bookkeeping_ratio']:.2f})")
    print(f"one cache lookup: {got['lookup_ms']:.3f} ms")
    print(f"/forget of a user with {args.photos} results: {got['erase_ms']:.1f} ms "
          f"({got['erase_in_lookups']:.0f} lookups)")
    print(f"retention sweep of {got['swept_results']} old results: {got['sweep_ms']:.0f} ms "
          f"({got['sweep_in_lookups']:.0f} lookups)")


if __name__ == "__main__":
    main()
