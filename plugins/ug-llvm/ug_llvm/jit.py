"""LLVM setup, O3 optimization, object code, disk cache and the MCJIT engine.

One target machine (host triple, CPU name and features), one pass builder and one MCJIT
engine for the whole process. Each kernel module is optimized at O3 (loop + SLP
vectorization), turned into an object file by the target machine and added to the engine
with `add_object_file`; the object bytes are what the disk cache stores.

Disk cache (ug_core.diskcache, shared with the other backends): `$UG_LLVM_CACHE_DIR`, else
`$XDG_CACHE_HOME/ug/llvm`, else `~/.cache/ug/llvm`; `UG_LLVM_DISK_CACHE=0` disables it,
`UG_DISK_CACHE_MAX_MB` caps its size. Key: sha256 of the LLVM IR, the llvmlite and LLVM
versions, the CPU name and feature string, the optimization settings and the cache format.
An entry is native code, so before LLVM's loader sees it, it must be this user's, carry a
matching sha256 of its payload, and be an ELF object with the header this target machine
writes and every table inside the file; anything else is recompiled, never a crash.
"""

from __future__ import annotations

import threading
from pathlib import Path

import llvmlite
import llvmlite.binding as llvm

from ug_core import diskcache

OPT_LEVEL = 3
_MAGIC = b"UGLLVMO2"


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
        self.disk = diskcache.DiskCache("llvm", "UG_LLVM_CACHE_DIR", "UG_LLVM_DISK_CACHE", "o", _MAGIC,
                                        validate=self._object_problem)
        self._elf_kind: diskcache.ElfKind | None = None

    # -- pieces
    def key(self, ir: str) -> str:
        return self.disk.key(self.fingerprint, ir)

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
    def _object_problem(self, obj: bytes) -> str | None:
        """What keeps `obj` (a cached entry's payload) from being an object file this target
        machine could have written, or None."""
        if self._elf_kind is None:  # the header this machine writes: from an empty module's object
            self._elf_kind = diskcache.elf_kind(self.tm.emit_object(llvm.parse_assembly("")))
        return diskcache.elf_problem(obj, self._elf_kind)

    def _read_cache(self, key: str) -> bytes | None:
        found = self.disk.read(key)
        if found.status == "corrupt":
            self.stats["disk_corrupt"] += 1
        return found.payload

    def _write_cache(self, key: str, obj: bytes) -> None:
        self.disk.write(key, obj)

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
                else:  # sound, but not what it should be: compiled again and rewritten below
                    self.stats["disk_corrupt"] += 1
                    self.disk.remove(key)
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
