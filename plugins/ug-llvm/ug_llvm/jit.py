"""LLVM setup, O3 optimization, object code, disk cache and the MCJIT engine.

One target machine (host triple, CPU name and features), one pass builder and one MCJIT
engine for the whole process. Each kernel module is optimized at O3 (loop + SLP
vectorization), turned into an object file by the target machine and added to the engine
with `add_object_file`; the object bytes are what the disk cache stores.

Disk cache: `$UG_LLVM_CACHE_DIR`, else `$XDG_CACHE_HOME/ug/llvm`, else `~/.cache/ug/llvm`;
`UG_LLVM_DISK_CACHE=0` disables it. Key: sha256 of the LLVM IR, the llvmlite and LLVM
versions, the CPU name and feature string and the optimization settings. Each entry carries
a sha256 of its payload, so a truncated or corrupt entry is detected (and recompiled)
before LLVM sees it.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from pathlib import Path

import llvmlite
import llvmlite.binding as llvm

from ug_core import diskcache

OPT_LEVEL = 3
_MAGIC = b"UGLLVMO1"


class LLVMError(Exception):
    """LLVM rejected the module (parse / verify / codegen)."""


def llvm_version() -> str:
    return ".".join(str(v) for v in llvm.llvm_version_info)


def cache_dir() -> Path:
    return diskcache.cache_dir("llvm", "UG_LLVM_CACHE_DIR")


def disk_cache_enabled() -> bool:
    return diskcache.enabled("UG_LLVM_DISK_CACHE")


class Jit:
    def __init__(self) -> None:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        self.triple = llvm.get_process_triple()
        target = llvm.Target.from_triple(self.triple)
        self.cpu = llvm.get_host_cpu_name()
        self.features = llvm.get_host_cpu_features().flatten()
        self.tm = target.create_target_machine(cpu=self.cpu, features=self.features, opt=OPT_LEVEL,
                                               reloc="static", codemodel="jitdefault", jit=True)
        self.data_layout = str(self.tm.target_data)
        pto = llvm.create_pipeline_tuning_options(speed_level=OPT_LEVEL)
        pto.loop_vectorization = True
        pto.slp_vectorization = True
        pto.loop_interleaving = True
        pto.loop_unrolling = True
        self._pto = pto
        self.pb = llvm.create_pass_builder(self.tm, pto)
        self.engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), self.tm)
        self.lock = threading.Lock()
        self.loaded: dict[str, int] = {}   # symbol -> address
        self.stats = {"compiled": 0, "disk_hits": 0, "disk_corrupt": 0}
        self.fingerprint = "|".join([llvmlite.__version__, llvm_version(), self.triple, self.cpu, self.features,
                                     f"O{OPT_LEVEL}", "vec+slp+ilv+unroll"])

    # -- pieces
    def key(self, ir: str) -> str:
        return hashlib.sha256((self.fingerprint + "\n" + ir).encode()).hexdigest()

    def parse(self, ir: str) -> llvm.ModuleRef:
        try:
            module = llvm.parse_assembly(ir)
            module.verify()
        except RuntimeError as e:
            raise LLVMError(str(e)) from None
        return module

    def optimize(self, module: llvm.ModuleRef) -> None:
        self.pb.getModulePassManager().run(module, self.pb)

    def optimized_ir(self, ir: str) -> str:
        module = self.parse(ir)
        self.optimize(module)
        return str(module)

    def assembly(self, ir: str) -> str:
        module = self.parse(ir)
        self.optimize(module)
        return self.tm.emit_assembly(module)

    def object_code(self, ir: str) -> bytes:
        module = self.parse(ir)
        self.optimize(module)
        return self.tm.emit_object(module)

    # -- disk cache
    def _cache_path(self, key: str) -> Path:
        return cache_dir() / key[:2] / f"{key}.o"

    def _read_cache(self, key: str) -> bytes | None:
        path = self._cache_path(key)
        try:
            data = path.read_bytes()
        except OSError:
            return None
        if (len(data) < len(_MAGIC) + 32 or data[:len(_MAGIC)] != _MAGIC
                or hashlib.sha256(data[len(_MAGIC) + 32:]).digest() != data[len(_MAGIC):len(_MAGIC) + 32]):
            self.stats["disk_corrupt"] += 1
            return None
        return data[len(_MAGIC) + 32:]

    def _write_cache(self, key: str, obj: bytes) -> None:
        path = self._cache_path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as f:
                f.write(_MAGIC + hashlib.sha256(obj).digest() + obj)
            os.replace(tmp, path)  # atomic: readers never see a partial entry
        except OSError:
            pass  # a read-only or full cache dir only costs speed

    # -- the entry point
    def load(self, ir: str, symbol: str) -> int:
        """Address of `symbol` (defined by `ir`), compiling or loading it from the disk cache."""
        with self.lock:
            addr = self.loaded.get(symbol)
            if addr:
                return addr
            key = self.key(ir)
            use_disk = disk_cache_enabled()
            obj = self._read_cache(key) if use_disk else None
            if obj is not None:
                addr = self._add_object(obj, symbol)
                if addr:
                    self.stats["disk_hits"] += 1
                else:
                    self.stats["disk_corrupt"] += 1
            if not addr:
                obj = self.object_code(ir)
                self.stats["compiled"] += 1
                addr = self._add_object(obj, symbol)
                if not addr:
                    raise LLVMError(f"symbol {symbol} not found after compiling")
                if use_disk:
                    self._write_cache(key, obj)
            self.loaded[symbol] = addr
            return addr

    def address(self, symbol: str) -> int:
        """Address of another symbol of a module that `load` has loaded (a second entry point)."""
        with self.lock:
            addr = self.loaded.get(symbol)
            if not addr:
                addr = int(self.engine.get_function_address(symbol) or 0)
                if not addr:
                    raise LLVMError(f"symbol {symbol} is not loaded")
                self.loaded[symbol] = addr
            return addr

    def _add_object(self, obj: bytes, symbol: str) -> int:
        try:
            self.engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
            self.engine.finalize_object()  # resolve relocations (constant pools, calls) now
            return int(self.engine.get_function_address(symbol) or 0)
        except Exception:
            return 0


_JIT: Jit | None = None
_JIT_LOCK = threading.Lock()


def get_jit() -> Jit:
    global _JIT
    with _JIT_LOCK:
        if _JIT is None:
            _JIT = Jit()
        return _JIT
