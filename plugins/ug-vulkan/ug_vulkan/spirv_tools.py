"""spirv-tools, where installed: spirv-val checks modules (UG_VULKAN_VALIDATE, the tests),
spirv-dis shows them (UG_DEBUG=3, compile errors)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile


def spirv_val_path() -> str | None:
    return shutil.which("spirv-val")


def _run_on(binary: bytes, argv: list[str]) -> subprocess.CompletedProcess[str]:
    with tempfile.NamedTemporaryFile(suffix=".spv", delete=False) as f:
        f.write(binary)
        path = f.name
    try:
        return subprocess.run([*argv, path], capture_output=True, text=True)
    finally:
        os.unlink(path)


def validate_spirv(binary: bytes, target_env: str = "vulkan1.1") -> str | None:
    """spirv-val's complaint about `binary`, or None if it is valid (or spirv-val is missing)."""
    exe = spirv_val_path()
    if exe is None:
        return None
    done = _run_on(binary, [exe, "--target-env", target_env])
    return None if done.returncode == 0 else (done.stdout + done.stderr).strip()


def disassemble(binary: bytes) -> str:
    exe = shutil.which("spirv-dis")
    if exe is None:
        return f"<{len(binary)} bytes of SPIR-V; install spirv-tools for a disassembly>"
    return _run_on(binary, [exe]).stdout
