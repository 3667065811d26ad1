"""LLVM: IR -> O3 (or a module's own level, see render_ir.pipeline_mark) -> object code (the kit's Compiler, cached on disk by the core) -> MCJIT.

One target machine (host triple, CPU name and features) and one pass builder (`ObjectCompiler`),
and one MCJIT engine (`Jit`) for the whole process. Each kernel module is optimized at O3 (loop +
SLP vectorization), turned into an object file by the target machine and added to the engine
with `add_object_file`; the object bytes are what the disk cache stores.

Disk cache: the kit's CachedCompiler (the core's disk cache, shared with the other backends):
`$UG_LLVM_CACHE_DIR`, else `$XDG_CACHE_HOME/ug/llvm`, else `~/.cache/ug/llvm`;
`UG_LLVM_DISK_CACHE=0` disables it, `UG_DISK_CACHE_MAX_MB` caps its size. Key: the LLVM IR and
`ObjectCompiler.identity()` (llvmlite and LLVM versions, triple, CPU name and features, the
optimization settings). An entry is native code, so before LLVM's loader sees it, it must be
this user's, carry a matching sha256 of its payload, and be an ELF object with the header this
target machine writes and every table inside the file (`validate`); anything else is recompiled,
never a crash. One that passes all that and still does not load is recompiled too.
"""

from __future__ import annotations

import os
import sys
import threading
import time

import llvmlite
import llvmlite.binding as llvm

from ug_core.kit import (CachedCompiler, CompileError, Compiler, ElfKind, after_fork_in_child, defer_interrupts, elf_kind,
                         elf_problem)

from .render_ir import PIPELINE_MARK

OPT_LEVEL = 3


def _debug() -> bool:
    """UG_DEBUG >= 1 (as the core's runtime reads it)."""
    try:
        return int(os.environ.get("UG_DEBUG", "0") or 0) >= 1
    except ValueError:
        return False


class LLVMError(RuntimeError):
    """The engine could not load object code, or has no such symbol."""


def llvm_version() -> str:
    return ".".join(str(v) for v in llvm.llvm_version_info)


class ObjectCompiler(Compiler):
    """LLVM IR -> optimized object code for this machine's CPU."""

    name, suffix = "llvm", "o"

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
        self.pb = self._pass_builder(OPT_LEVEL)
        self._pbs: dict[int, llvm.PassBuilder] = {OPT_LEVEL: self.pb}   # by pipeline level (render_ir.pipeline_mark)
        self._identity = "|".join([llvmlite.__version__, llvm_version(), self.triple, self.cpu, self.features,
                                   f"O{OPT_LEVEL}", "vec+slp+ilv+unroll"])
        self._elf_kind: ElfKind | None = None
        self.lock = threading.Lock()   # one thread at a time in the pass builder and target machine

    def _pass_builder(self, level: int) -> llvm.PassBuilder:
        pto = llvm.create_pipeline_tuning_options(speed_level=level)
        pto.loop_vectorization = pto.slp_vectorization = pto.loop_interleaving = pto.loop_unrolling = level >= 2
        return llvm.create_pass_builder(self.tm, pto)

    def identity(self) -> str:
        return self._identity

    def level_of(self, ir: str) -> int:
        """The pipeline level of a module: its pipeline_mark's, else OPT_LEVEL."""
        if ir.startswith(PIPELINE_MARK) and ir[len(PIPELINE_MARK):len(PIPELINE_MARK) + 1] in "0123":
            return int(ir[len(PIPELINE_MARK)])
        return OPT_LEVEL

    def optimized(self, ir: str) -> llvm.ModuleRef:
        try:
            module = llvm.parse_assembly(ir)
            module.verify()
        except RuntimeError as e:
            raise CompileError(f"LLVM rejected the module: {e}", ir) from None
        level = self.level_of(ir)
        with self.lock:
            pb = self._pbs.get(level)
            if pb is None:
                pb = self._pbs[level] = self._pass_builder(level)
            pb.getModulePassManager().run(module, pb)
        return module

    def optimized_ir(self, ir: str) -> str:
        return str(self.optimized(ir))

    def assembly(self, ir: str) -> str:
        module = self.optimized(ir)
        with self.lock:
            return self.tm.emit_assembly(module)

    def compile(self, source: str, name: str) -> bytes:
        module = self.optimized(source)
        with self.lock:
            return self.tm.emit_object(module)

    def validate(self, binary: bytes) -> str | None:
        """What keeps `binary` from being an object file this target machine could have written."""
        if self._elf_kind is None:  # the header this machine writes: from an empty module's object
            self._elf_kind = elf_kind(self.compile("", "empty"))
        return elf_problem(binary, self._elf_kind)


class Jit:
    """The process's MCJIT engine, loading object code from the (disk-cached) ObjectCompiler."""

    def __init__(self) -> None:
        self.target = ObjectCompiler()
        self.compiler = CachedCompiler(self.target)
        # what renderers need of the target (render, gemm, pool)
        self.triple, self.cpu, self.features = self.target.triple, self.target.cpu, self.target.features
        self.data_layout = self.target.data_layout
        self.engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), self.target.tm)
        # the engine's: held only to add an object and look a symbol up, never for a compile, so
        # that a module compiling in one thread (the tiers' background gemm or attention module,
        # a second or more) does not hold up another thread's compile beyond the one LLVM call in
        # progress (llvmlite runs one LLVM call at a time in a process, its own lock)
        self.lock = threading.RLock()
        self.loaded: dict[str, int] = {}   # symbol -> address
        # symbol -> the lock of its load in progress: a second thread loading the same module
        # waits for the first one's instead of compiling it again
        self._loading: dict[str, threading.Lock] = {}

    def load(self, ir: str, symbol: str, label: str = "") -> int:
        """Address of `symbol` (defined by `ir`), compiling or loading it from the disk cache.
        Raises CompileError (LLVM rejected the IR) or LLVMError (the object does not load).
        With UG_DEBUG >= 1, a module compiled or read here (the backend's own: the gemm's, the
        attention's, the pool's; kernels are logged by the runtime) is logged as `label`.
        The compile runs outside the engine's lock (see __init__)."""
        addr = self.loaded.get(symbol)
        if addr:
            return addr
        with self.lock:
            gate = self._loading.setdefault(symbol, threading.Lock())
        with gate:
            addr = self.loaded.get(symbol)   # (loaded by the thread that held the gate)
            if addr:
                return addr
            try:
                start, compiled = time.perf_counter(), self.compiler.stats["compiled"]
                addr = self.compiler.load(ir, symbol, lambda obj: self.add(obj, symbol))
            finally:
                with self.lock:
                    if self._loading.get(symbol) is gate:
                        del self._loading[symbol]
            if _debug():
                how = "compiled" if self.compiler.stats["compiled"] > compiled else "loaded from the disk cache"
                print(f"{how} {label or symbol} on cpu in {(time.perf_counter() - start) * 1e3:.2f} ms",
                      file=sys.stderr, flush=True)
            return addr

    def add(self, obj: bytes, symbol: str) -> int:
        """Address of `symbol` once the object code defining it is in the engine (an object
        whose symbol is already there is not added twice: the same module compiled again)."""
        with defer_interrupts, self.lock:   # (Ctrl-C between adding and recording would add it twice)
            addr = self.loaded.get(symbol)
            if not addr:
                try:
                    self.engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
                    self.engine.finalize_object()  # resolve relocations (constant pools, calls) now
                except Exception as e:
                    raise LLVMError(f"LLVM could not load the object code of {symbol}: {e}") from None
                addr = self.address(symbol)
            return addr

    def address(self, symbol: str) -> int:
        """Address of a symbol of a module that is loaded (e.g. a second entry point)."""
        with self.lock:
            addr = self.loaded.get(symbol)
            if not addr:
                addr = int(self.engine.get_function_address(symbol) or 0)
                if not addr:
                    raise LLVMError(f"symbol {symbol} is not loaded")
                self.loaded[symbol] = addr
            return addr


_JIT: Jit | None = None
_JIT_LOCK = threading.Lock()


def get_jit() -> Jit:
    global _JIT
    with _JIT_LOCK:
        if _JIT is None:
            _JIT = Jit()
        return _JIT


@after_fork_in_child
def _new_locks() -> None:
    """In a forked child: new locks (another thread of the parent may have held them)."""
    global _JIT_LOCK
    _JIT_LOCK = threading.Lock()
    if _JIT is not None:
        _JIT.lock = threading.RLock()
        _JIT._loading = {}
        _JIT.target.lock = threading.Lock()
