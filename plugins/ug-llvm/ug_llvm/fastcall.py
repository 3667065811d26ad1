"""A tiny kernel's launch as a Python builtin function (METH_FASTCALL) compiled by LLVM: one
call from Python to the kernel, with no ctypes in between.

ug.jit's replay of a tiny kernel (64 elements) is mostly the Python code around the kernel, and
the launch was two C-level calls of it: the struct's pack of the buffers' addresses into the
argument array, then the ctypes call of the kernel's `.all` entry (ctypes converts its argument,
builds its call frame and checks the result). This is both in native code: `launch(h0, h1, ...)`
reads each handle (an int: memory.Block is one) with PyLong_AsVoidPtr into an array on the
stack and calls the entry with it, holding the GIL (it is only for work below HOLD_GIL_WORK,
which the ctypes path held the GIL for too).

The function is an ordinary builtin: PyCFunction_NewEx over a PyMethodDef whose ml_meth is the
LLVM-compiled `PyObject *f(PyObject *self, PyObject *const *args, Py_ssize_t nargs)`; `self` is the
kernel entry's address as a Python int. One native function per number of arguments, one
builtin per kernel. No C compiler or Python headers are needed: the C API functions it calls are
the running interpreter's, found through ctypes.pythonapi (so a Python without them, or a build
that is not CPython, keeps the ctypes path: `fast_launcher` returns None).
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any, Callable

import llvmlite.binding as llvm

METH_FASTCALL = 0x0080

_C_API = ("PyLong_AsVoidPtr", "PyErr_Occurred", "PyErr_SetString", "Py_IncRef")
_C_DATA = ("_Py_NoneStruct", "PyExc_TypeError")


class _MethodDef(ctypes.Structure):
    _fields_ = [("ml_name", ctypes.c_char_p), ("ml_meth", ctypes.c_void_p), ("ml_flags", ctypes.c_int),
                ("ml_doc", ctypes.c_char_p)]


def fastcall_ir(name: str, nargs: int, triple: str, data_layout: str) -> str:
    """LLVM IR of the METH_FASTCALL function `{name}(self, args, nargs)`: self's address (an int)
    called with the addresses of the `nargs` int arguments in an array; returns None, or NULL
    with an exception set (a wrong count, an argument that is not an int)."""
    lines = [
        f'target triple = "{triple}"',
        f'target datalayout = "{data_layout}"',
        "declare ptr @PyLong_AsVoidPtr(ptr)",
        "declare ptr @PyErr_Occurred()",
        "declare void @PyErr_SetString(ptr, ptr)",
        "declare void @Py_IncRef(ptr)",
        "@_Py_NoneStruct = external global i8",
        "@PyExc_TypeError = external global ptr",
        f'@{name}.msg = private unnamed_addr constant [{len(_count_message(nargs)) + 1} x i8] c"{_count_message(nargs)}\\00"',
        f"define ptr @{name}(ptr %self, ptr %args, i64 %nargs) {{",
        "entry:",
        f"  %arr = alloca [{max(nargs, 1)} x ptr], align 8",
        f"  %right = icmp eq i64 %nargs, {nargs}",
        "  br i1 %right, label %read, label %count",
        "count:",
        "  %type_error = load ptr, ptr @PyExc_TypeError, align 8",
        f"  call void @PyErr_SetString(ptr %type_error, ptr @{name}.msg)",
        "  ret ptr null",
        "read:",
        "  %fn = call ptr @PyLong_AsVoidPtr(ptr %self)",
    ]
    for i in range(nargs):
        lines += [f"  %at{i} = getelementptr inbounds ptr, ptr %args, i64 {i}",
                  f"  %obj{i} = load ptr, ptr %at{i}, align 8",
                  f"  %h{i} = call ptr @PyLong_AsVoidPtr(ptr %obj{i})",
                  f"  %slot{i} = getelementptr inbounds ptr, ptr %arr, i64 {i}",
                  f"  store ptr %h{i}, ptr %slot{i}, align 8"]
    if nargs == 0:   # (a kernel without arguments gets one null pointer, as launch.packer's)
        lines += ["  store ptr null, ptr %arr, align 8"]
    lines += [
        # one check for all: PyLong_AsVoidPtr sets an exception for an argument that is not an int
        "  %err = call ptr @PyErr_Occurred()",
        "  %failed = icmp ne ptr %err, null",
        "  br i1 %failed, label %fail, label %run",
        "fail:",
        "  ret ptr null",
        "run:",
        "  call void %fn(ptr %arr)",
        "  call void @Py_IncRef(ptr @_Py_NoneStruct)",
        "  ret ptr @_Py_NoneStruct",
        "}",
    ]
    return "\n".join(lines)


def _count_message(nargs: int) -> str:
    return f"a kernel launch takes {nargs} buffer handles"


_DEFS: dict[int, _MethodDef] = {}
"""The method definitions by number of arguments, for the life of the process: every builtin made
from one points at it (and the native functions they name stay in the process's one engine)."""
_LOCK = threading.Lock()


class FastLaunch:
    """Builtins that launch kernel entries (`launcher(address, nargs)`), made on first use per
    number of arguments; `available` is False where the interpreter's C API cannot be found."""

    def __init__(self, jit: Any):
        self.jit = jit
        self._new = None
        try:
            api = ctypes.pythonapi
            for symbol in _C_API:
                llvm.add_symbol(symbol, ctypes.cast(getattr(api, symbol), ctypes.c_void_p).value)
            for symbol in _C_DATA:
                llvm.add_symbol(symbol, ctypes.addressof(ctypes.c_char.in_dll(api, symbol)))
            new = api.PyCFunction_NewEx
            new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.py_object, ctypes.c_void_p]
            self._new = new
        except (AttributeError, ValueError, OSError):
            pass   # no such C API in this interpreter: `available` is False, launches take the ctypes path

    @property
    def available(self) -> bool:
        return self._new is not None

    def _method(self, nargs: int) -> _MethodDef:
        with _LOCK:
            method = _DEFS.get(nargs)
            if method is None:
                name = f"ug_fastcall_{nargs}"
                address = self.jit.load(fastcall_ir(name, nargs, self.jit.triple, self.jit.data_layout), name)
                method = _DEFS[nargs] = _MethodDef(b"ug_launch", address, METH_FASTCALL, None)
            return method

    def launcher(self, address: int, nargs: int) -> Callable[..., None] | None:
        """`launch(*handles)`: the entry at `address` (void entry(ptr *args)) called with the
        handles of its `nargs` arguments, holding the GIL; None where unavailable."""
        if self._new is None:
            return None
        method = self._method(nargs)
        return self._new(ctypes.addressof(method), int(address), None)  # type: ignore[no-any-return]
