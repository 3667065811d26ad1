"""The core's one cache policy (ug_core/cache.py): an LRU map bounded by entry count or by bytes,
with hit/miss/eviction counts, and ug.cache_stats() listing every in-memory cache of the core."""

import importlib
import pathlib
import re
import sys

import numpy as np
import pytest

import ug_core as ug
import ug_core.kit.device  # noqa: F401  (declares the kit's caches)
from ug_core import cache as cache_module
from ug_core.cache import Cache

CORE = pathlib.Path(ug.__file__).parent


@pytest.fixture(autouse=True)
def _own_names(monkeypatch):
    """Names this module's caches declare are forgotten after each test (cache_stats lists every
    name ever declared)."""
    monkeypatch.setattr(cache_module, "_declared", dict(cache_module._declared))


def test_count_bound_evicts_the_least_recently_used():
    c = Cache("test.count", max_entries=3)
    for k in "abc":
        c.put(k, k.upper())
    assert c.get("a") == "A"          # a is now the most recently used
    c.put("d", "D")                   # b, the least recently used, goes
    assert c.keys() == ["c", "a", "d"] and "b" not in c
    assert c.peek("c") == "C"         # a peek is no use: c stays the least recently used
    c["e"] = "E"
    assert c.keys() == ["a", "d", "e"]
    c.put("a", "A2")                  # a write is a use too, and replaces the value
    c.put("f", "F")
    assert c.keys() == ["e", "a", "f"] and c["a"] == "A2" and len(c) == 3
    assert c.stats()["evictions"] == 3


def test_byte_bound_evicts_until_the_entries_fit():
    c = Cache("test.bytes", max_bytes=100, size_of=len)
    c.put("a", b"x" * 40)
    c.put("b", b"x" * 40)
    assert c.bytes == 80 and c.stats()["bytes"] == 80
    c.put("c", b"x" * 30)             # 110 > 100: a goes
    assert c.keys() == ["b", "c"] and c.bytes == 70
    c.put("b", b"x" * 10)             # replacing b counts its new size only
    assert c.bytes == 40 and c.keys() == ["c", "b"]
    c.put("big", b"x" * 101)          # larger than the bound alone: not kept (an eviction), the rest stays
    assert c.keys() == ["c", "b"] and c.bytes == 40 and "big" not in c
    c.put("b", b"x" * 200)            # nor is a value that replaces one
    assert c.keys() == ["c"] and c.bytes == 30
    c.put("d", b"x" * 60)
    assert c.pop("d") == b"x" * 60 and c.bytes == 30   # a pop is no eviction
    assert c.stats()["evictions"] == 3


def test_both_bounds_and_no_bound():
    c = Cache("test.both", max_entries=2, max_bytes=10, size_of=len)
    c.put("a", "12345")
    c.put("b", "1")
    c.put("c", "1")                   # the count bound: a goes
    assert c.keys() == ["b", "c"]
    c.put("d", "123456789")           # the byte bound: b goes (c and d make 10 bytes)
    assert c.keys() == ["c", "d"] and c.bytes == 10
    c.put("e", "12")                  # both: c goes for the count, d for the bytes
    assert c.keys() == ["e"] and c.bytes == 2
    free = Cache("test.unbounded")
    for i in range(1000):
        free.put(i, i)
    assert len(free) == 1000 and free.stats()["evictions"] == 0 and free.stats()["bytes"] is None
    none = Cache("test.none", max_entries=0)   # a bound of 0 keeps nothing
    none.put("a", 1)
    assert len(none) == 0 and none.get("a") is None


def test_stats_count_hits_misses_and_evictions():
    c = Cache("test.stats", max_entries=2)
    assert c.get("a") is None and c.get("a", 7) == 7
    c.put("a", 1)
    c.put("b", 2)
    assert c.get("a") == 1 and c.get("b") == 2 and c["a"] == 1
    with pytest.raises(KeyError):
        c["zz"]
    c.put("c", 3)
    assert c.stats() == {"entries": 2, "bytes": None, "hits": 3, "misses": 3, "evictions": 1,
                         "max_entries": 2, "max_bytes": None}
    with pytest.raises(TypeError):    # an unhashable key: an error, counted as nothing
        c.get([1])
    assert c.stats()["misses"] == 3
    c.clear()
    assert c.stats() == {"entries": 0, "bytes": None, "hits": 0, "misses": 0, "evictions": 0,
                         "max_entries": 2, "max_bytes": None}


def test_bad_bounds_are_value_errors():
    with pytest.raises(ValueError, match="max_entries"):
        Cache("test.bad", max_entries=-1)
    with pytest.raises(ValueError, match="size_of"):
        Cache("test.bad", max_bytes=10)


def test_cache_stats_adds_up_caches_of_one_name():
    a, b = Cache("test.shared", max_entries=4), Cache("test.shared", max_entries=8)
    a.put(1, 1)
    b.put(1, 1)
    b.put(2, 2)
    a.get(1)
    b.get(3)
    row = ug.cache_stats()["test.shared"]
    assert row == {"entries": 3, "bytes": None, "hits": 1, "misses": 1, "evictions": 0, "max_entries": 8,
                   "max_bytes": None, "instances": 2}
    del a, b
    cache_module.declare("test.later", 5)
    assert ug.cache_stats()["test.later"] == {"entries": 0, "bytes": None, "hits": 0, "misses": 0, "evictions": 0,
                                              "max_entries": 5, "max_bytes": None, "instances": 0}


def _named_in_source() -> set[str]:
    """The cache names ug_core's source makes or declares."""
    names = set()
    for path in CORE.rglob("*.py"):
        if "testing" in path.parts or path.name == "cache.py":
            continue
        text = path.read_text()
        names.update(re.findall(r"""\b(?:Cache|declare)\(\s*["']([\w.]+)["']""", text))
    return names


# modules that `import ug_core` does not import (an optional dependency's glue) declare their
# caches when they are imported: imported here, before the fixture above copies the declarations
OPTIONAL_MODULES = {"dask.jitted": "ug_core.dask"}
for _module in OPTIONAL_MODULES.values():
    try:
        importlib.import_module(_module)
    except ImportError:   # its dependency is not installed
        pass


def test_cache_stats_lists_every_cache():
    names = _named_in_source()
    for name, module in OPTIONAL_MODULES.items():
        if module not in sys.modules:   # not installed: nothing declares the cache
            names.discard(name)
    assert {"runtime.programs", "runtime.schedules", "scalars.buffers", "jit.traces", "kit.programs",
            "diskcache.directories"} <= names
    stats = ug.cache_stats()
    assert names <= set(stats), names - set(stats)
    for name in names:
        assert set(stats[name]) == {"entries", "bytes", "hits", "misses", "evictions", "max_entries", "max_bytes",
                                    "instances"}
    # the singletons exist from import on, bounded
    for name in ("runtime.programs", "runtime.schedules", "scalars.buffers"):
        assert stats[name]["instances"] == 1 and stats[name]["max_entries"] >= 1


def test_one_cache_policy_in_the_core():
    # no other bounded or unbounded memo than cache.Cache: an OrderedDict or functools cache
    # made in ug_core (outside cache.py) would be a cache with a policy of its own
    for path in CORE.rglob("*.py"):
        if "testing" in path.parts or path.name == "cache.py":
            continue
        text = path.read_text()
        assert not re.search(r"OrderedDict\(\)|lru_cache|functools\.cache\b|@cache\b", text), path


def test_the_core_counts_through_its_caches():
    before = ug.cache_stats()
    x = ug.tensor(np.arange(6, dtype=np.float32), device="ref")
    for c in (1.25, 2.75):
        (x * c + 3.5).numpy()         # the second one reuses the first one's compiled steps
    f = ug.jit(lambda t: t * 2.25)
    for _ in range(3):
        f(x)
    after = ug.cache_stats()
    assert after["runtime.schedules"]["hits"] >= before["runtime.schedules"]["hits"] + 1
    assert after["scalars.buffers"]["misses"] >= before["scalars.buffers"]["misses"] + 2
    assert after["jit.traces"]["instances"] >= 1 and after["jit.traces"]["entries"] >= 1
    assert len(f.traces) == 1 and list(f.traces) == f.traces.keys()
