"""One cache policy for the core: a least-recently-used map bounded by entry count or by bytes,
with hit, miss and eviction counts, and `cache_stats()` (ug.cache_stats) listing every cache.

Every in-memory cache of ug_core is a `Cache`, named where it is made:

- runtime.programs: compiled programs by (device, backend version, kernel)
  (`UG_MAX_CACHED_PROGRAMS`, default 1024);
- runtime.schedules: the compiled steps of realized graphs, by their structure (512);
- scalars.buffers: the one-element buffers of Python scalars and of kernels' view offsets
  (`UG_MAX_CACHED_SCALARS`, default 1024);
- jit.traces: each ug.jit function's traces (its `max_traces`; one cache per function);
- kit.programs: the programs a kit device builds itself, with what their launches need (its
  matmuls, the gpu sort and fft passes by shape; 256, one cache per device);
- diskcache.directories: what a backend's disk cache knows of its directories (16; one
  cache per backend);
- ref.chain_indices: the ref device's (and tier 0's) index arrays of a view chain (512, 64 MiB).

An evicted entry is only forgotten: whatever still holds it (a kept schedule its programs, a
trace its scalar buffers) keeps it alive, and the next lookup makes it again.

Not caches in this sense: a kit device's pool of freed memory (kit.allocator.CachingAllocator,
capped in bytes by `UG_POOL_CACHE_MB`, ug.memory_stats' pool_bytes) holds blocks to reuse, not
values to look up, and backends' disk caches (diskcache.py) are on disk.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import Any, Callable, Generic, Hashable, Iterator, TypeVar, cast

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_MISSING: Any = object()

_caches: "weakref.WeakSet[Cache[Any, Any]]" = weakref.WeakSet()
_declared: dict[str, tuple[int | None, int | None]] = {}   # every cache name: its (max_entries, max_bytes)


def declare(name: str, max_entries: int | None = None, max_bytes: int | None = None) -> str:
    """Make `cache_stats` list `name`, with these bounds, before any cache of that name exists
    (caches made on first use, one per device or per function); returns `name`."""
    _declared.setdefault(name, (max_entries, max_bytes))
    return name


class _Entry:
    """One entry: its key (with the key's hash, computed once), value and bytes. The cache's
    OrderedDict maps each entry to itself: a lookup by a plain key hashes that key once and
    compares it with the entry's (`__eq__`), and marking the entry used (`move_to_end`) finds
    it by its kept hash and identity, without hashing or comparing a large key again (a
    graph's structure key: ~150 us to hash for 1000 nodes)."""

    __slots__ = ("key", "value", "size", "_hash")

    def __init__(self, key: Any, value: Any, size: int):
        self._hash = hash(key)
        self.key = key
        self.value = value
        self.size = size

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return bool(self.key == (other.key if type(other) is _Entry else other))


class Cache(Generic[K, V]):
    """A map that keeps its most recently used entries: at most `max_entries` of them (None: no
    bound) and, given `size_of` (an entry's bytes), at most `max_bytes` bytes (an entry larger
    than that alone is not kept, and counts as evicted). Lookups with `get` and writes count as
    use; `peek`, `in` and iteration (least recently used first) do not.

    Lookups take no lock (a dict read and an LRU move, each atomic under the GIL), so the hot
    paths (a realize's kept schedule, a scalar's buffer) stay cheap; writes and evictions take
    the cache's lock. The counts are statistics: threads racing may lose an increment. No
    entry refers to another: dropping a cache frees what it holds by reference counting."""

    def __init__(self, name: str, max_entries: int | None = None, max_bytes: int | None = None,
                 size_of: Callable[[V], int] | None = None):
        if max_entries is not None and max_entries < 0:
            raise ValueError(f"cache {name!r}: max_entries must be >= 0 or None, got {max_entries}")
        if max_bytes is not None and (max_bytes < 0 or size_of is None):
            raise ValueError(f"cache {name!r}: max_bytes needs size_of and must be >= 0, got {max_bytes}")
        self.name = declare(name, max_entries, max_bytes)
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._size_of = size_of
        self._data: OrderedDict[Any, _Entry] = OrderedDict()   # (an entry under itself, see _Entry)
        self.bytes = 0
        self.hits = 0
        self.misses = 0
        self.evictions = 0
        self._lock = threading.Lock()
        _caches.add(self)

    @classmethod
    def of(cls, name: str) -> "Cache[Any, Any]":
        """A new cache of a declared name, with the bounds declared for it."""
        max_entries, max_bytes = _declared[name]
        return cls(name, max_entries, max_bytes)

    # -- lookups
    def get(self, key: K, default: V | None = None) -> V | None:
        """The value under `key` (now the most recently used), or `default`; counts a hit or a
        miss. An unhashable key raises TypeError, counting neither."""
        entry = self._data.get(key)
        if entry is None:
            self.misses += 1
            return default
        self.hits += 1
        try:
            self._data.move_to_end(entry)
        except KeyError:   # another thread evicted it since the lookup
            pass
        return entry.value

    def peek(self, key: K, default: V | None = None) -> V | None:
        """The value under `key`, or `default`, as it is: no use, no count."""
        entry = self._data.get(key)
        return default if entry is None else entry.value

    def __getitem__(self, key: K) -> V:
        value = self.get(key, _MISSING)
        if value is _MISSING:
            raise KeyError(key)
        return cast(V, value)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __len__(self) -> int:
        return len(self._data)

    def __iter__(self) -> Iterator[K]:
        return iter(self.keys())

    def keys(self) -> list[K]:
        """The keys, least recently used first (a copy: other threads may write meanwhile)."""
        with self._lock:
            return [e.key for e in self._data]

    def values(self) -> list[V]:
        with self._lock:
            return [e.value for e in self._data]

    def items(self) -> list[tuple[K, V]]:
        with self._lock:
            return [(e.key, e.value) for e in self._data]

    # -- writes
    def put(self, key: K, value: V) -> None:
        """Keep `value` under `key` as the most recently used entry, then evict the least
        recently used entries while the cache is past a bound."""
        entry = _Entry(key, value, self._size_of(value) if self._size_of is not None else 0)
        with self._lock:
            self._forget(entry)   # (the key's old entry; found by the new one's hash)
            if self.max_bytes is not None and entry.size > self.max_bytes:
                self.evictions += 1   # larger than the bound alone: not kept (and nothing else goes)
                return
            self._data[entry] = entry
            self.bytes += entry.size
            self._evict()

    __setitem__ = put

    def pop(self, key: K, default: Any = None) -> Any:
        """Remove and return the value under `key` (`default` if absent); not an eviction."""
        with self._lock:
            entry = self._forget(key)
        return default if entry is None else entry.value

    def __delitem__(self, key: K) -> None:
        if self.pop(key, _MISSING) is _MISSING:
            raise KeyError(key)

    def clear(self) -> None:
        """Forget every entry and start the counts again."""
        with self._lock:
            self._data.clear()
            self.bytes = self.hits = self.misses = self.evictions = 0

    def _forget(self, key: Any) -> _Entry | None:
        entry = self._data.pop(key, None)
        if entry is not None:
            self.bytes -= entry.size
        return entry

    def _evict(self) -> None:
        max_entries, max_bytes = self.max_entries, self.max_bytes
        while self._data and ((max_entries is not None and len(self._data) > max_entries)
                              or (max_bytes is not None and self.bytes > max_bytes)):
            self._forget(next(iter(self._data)))
            self.evictions += 1

    def after_fork(self) -> None:
        """In a forked child: a new lock (another thread of the parent may have held it)."""
        self._lock = threading.Lock()

    def stats(self) -> dict[str, int | None]:
        """entries, bytes (None without size_of), hits, misses, evictions, max_entries, max_bytes."""
        return {"entries": len(self._data), "bytes": self.bytes if self._size_of is not None else None,
                "hits": self.hits, "misses": self.misses, "evictions": self.evictions,
                "max_entries": self.max_entries, "max_bytes": self.max_bytes}

    def __repr__(self) -> str:
        return f"Cache({self.name!r}, {len(self._data)} entries, max_entries={self.max_entries}, max_bytes={self.max_bytes})"


def cache_stats() -> dict[str, dict[str, int | None]]:
    """Every in-memory cache of ug, by name (see the module docstring for what each holds):

    - entries: what it holds now; bytes: their size, where the cache measures it (else None)
    - hits, misses: lookups that found an entry and that did not (since the cache was made or
      last cleared); evictions: entries dropped to stay within a bound
    - max_entries, max_bytes: its bounds (None: none)
    - instances: how many caches of that name exist (one per device, per ug.jit function, ...);
      their counts are added up, and their bounds are the largest of theirs.

    A cache declared but not made yet (no device has needed it) is listed with zeros and the
    bounds it will have."""
    rows: dict[str, dict[str, int | None]] = {
        name: {"entries": 0, "bytes": None, "hits": 0, "misses": 0, "evictions": 0, "max_entries": max_entries,
               "max_bytes": max_bytes, "instances": 0}
        for name, (max_entries, max_bytes) in sorted(_declared.items())}
    for cache in sorted(list(_caches), key=lambda c: c.name):
        row = rows[cache.name]
        first = not row["instances"]
        for field, value in cache.stats().items():
            known = row[field]
            if field in ("max_entries", "max_bytes"):   # (None: unbounded, the largest bound)
                row[field] = value if first or value is None or known is None else max(value, known)
            elif value is not None:
                row[field] = (known or 0) + value
        row["instances"] = (row["instances"] or 0) + 1
    return rows


def after_fork() -> None:
    """In a forked child: every cache's lock is new."""
    for cache in list(_caches):
        cache.after_fork()
